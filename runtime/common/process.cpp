#include "common/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

extern char** environ;

namespace hpctrain::common {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int decode(int raw) {
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : 1;
}

std::string name_of(const std::string& var) { return var.substr(0, var.find('=')); }

// posix_spawn's file actions, destroyed with it.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

// Connects the child's stream `fd` as `how` says; a pipe's write end goes to the child, its read
// end to `read_end`. Returns the write end, to be closed once the child has it.
UniqueFd connect(FileActions& actions, int fd, Stdio how, UniqueFd& read_end) {
  if (how == Stdio::kNull) {
    posix_spawn_file_actions_addopen(actions.get(), fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY,
                                     0);
  }
  if (how != Stdio::kPipe) return UniqueFd();
  if (fd == 0) throw std::invalid_argument("Process: stdin cannot be a pipe");
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  read_end.reset(ends[0]);
  posix_spawn_file_actions_adddup2(actions.get(), ends[1], fd);
  return UniqueFd(ends[1]);
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::vector<std::string> environment_with(const std::vector<std::string>& set) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    const bool replaced = std::any_of(
        set.begin(), set.end(), [&](const std::string& s) { return name_of(s) == name_of(var); });
    if (!replaced) out.push_back(var);
  }
  out.insert(out.end(), set.begin(), set.end());
  return out;
}

Process::Process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw std::invalid_argument("Process: empty argv");
  FileActions actions;
  UniqueFd unused;
  if (options.stdin_from >= 0) {
    posix_spawn_file_actions_adddup2(actions.get(), options.stdin_from, 0);
  } else {
    connect(actions, 0, options.in, unused);
  }
  UniqueFd out_write;
  if (options.stdout_to >= 0) {
    posix_spawn_file_actions_adddup2(actions.get(), options.stdout_to, 1);
  } else {
    out_write = connect(actions, 1, options.out, out_);
  }
  const UniqueFd err_write = connect(actions, 2, options.err, err_);
  auto args = c_strings(argv);
  auto envp = options.env ? c_strings(*options.env) : std::vector<char*>();
  const int rc = ::posix_spawnp(&pid_, args[0], actions.get(), nullptr, args.data(),
                                options.env ? envp.data() : environ);
  if (rc != 0) {
    pid_ = -1;
    error_ = std::strerror(rc);
    status_ = kStatusNotStarted;
    out_.reset();
    err_.reset();
  }
}

Process::~Process() { reap_or_kill(); }

Process::Process(Process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      status_(other.status_),
      error_(std::move(other.error_)),
      out_(std::move(other.out_)),
      err_(std::move(other.err_)),
      detached_(other.detached_) {}

Process& Process::operator=(Process&& other) noexcept {
  if (this != &other) {
    reap_or_kill();
    pid_ = std::exchange(other.pid_, -1);
    status_ = other.status_;
    error_ = std::move(other.error_);
    out_ = std::move(other.out_);
    err_ = std::move(other.err_);
    detached_ = other.detached_;
  }
  return *this;
}

void Process::reap_or_kill() {
  if (pid_ <= 0 || status_ || detached_) return;
  ::kill(pid_, SIGKILL);
  wait();
}

std::optional<int> Process::poll() {
  if (status_ || pid_ <= 0) return status_;
  int raw = 0;
  const pid_t got = ::waitpid(pid_, &raw, WNOHANG);
  if (got == pid_) {
    status_ = decode(raw);
  } else if (got < 0 && errno != EINTR) {
    status_ = kStatusNotStarted;  // not ours to wait for (reaped elsewhere): it will never end here
  }
  return status_;
}

std::optional<int> Process::wait_for(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto pause = milliseconds(1);
  while (true) {
    if (const auto status = poll()) return status;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, milliseconds(50));
  }
}

int Process::wait() {
  while (!status_) {
    int raw = 0;
    const pid_t got = ::waitpid(pid_, &raw, 0);
    if (got == pid_) status_ = decode(raw);
    if (got < 0 && errno != EINTR) status_ = kStatusNotStarted;
  }
  return *status_;
}

void Process::signal(int sig) {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

namespace {

// Reads the child's stdout and stderr into `result` until both close or the deadline: then TERM,
// and KILL two seconds later (a grandchild may hold the pipes open: reading stops there).
void read_output(Process& child, Clock::time_point deadline, size_t max_output,
                 CommandResult& result) {
  auto kill_deadline = Clock::time_point::max();
  struct pollfd fds[2] = {{child.out_fd(), POLLIN, 0}, {child.err_fd(), POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_streams = 2;
  while (open_streams > 0) {
    const auto now = Clock::now();
    if (!result.timed_out && now >= deadline) {
      result.timed_out = true;
      child.signal(SIGTERM);
      kill_deadline = now + std::chrono::seconds(2);
    }
    if (result.timed_out && now >= kill_deadline) {
      child.signal(SIGKILL);
      return;
    }
    const auto until = result.timed_out ? kill_deadline : deadline;
    const auto wait_ms = std::chrono::duration_cast<milliseconds>(until - now).count() + 1;
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(wait_ms, 1000)));
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[8192];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (sinks[i]->size() < max_output) {
          sinks[i]->append(buf, std::min<size_t>(got, max_output - sinks[i]->size()));
        }
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1;
        --open_streams;
      }
    }
  }
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, milliseconds timeout,
                          size_t max_output) {
  CommandResult result;
  Process child(argv, {std::nullopt, Stdio::kNull, Stdio::kPipe, Stdio::kPipe});
  if (!child.started()) {
    result.not_found = true;
    result.err = argv[0] + ": " + child.error();
    return result;
  }
  read_output(child, Clock::now() + timeout, max_output, result);
  result.exit_status = child.wait();
  return result;
}

}  // namespace hpctrain::common
