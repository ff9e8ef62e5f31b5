#include "common/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace hpctrain::common {
namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(), "pipe");
  }
  ~Pipe() {
    for (int f : fd) {
      if (f >= 0) ::close(f);
    }
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          size_t max_output) {
  if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
  CommandResult result;
  Pipe out, err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fd[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.not_found = true;
    result.err = argv[0] + ": " + std::strerror(rc);
    return result;
  }
  out.close_end(1);
  err.close_end(1);

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto kill_deadline = std::chrono::steady_clock::time_point::max();
  bool term_sent = false;
  struct pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_streams = 2;
  while (open_streams > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (!term_sent && now >= deadline) {
      result.timed_out = true;
      ::kill(pid, SIGTERM);
      term_sent = true;
      kill_deadline = now + std::chrono::seconds(2);
    }
    if (term_sent && now >= kill_deadline) {
      ::kill(pid, SIGKILL);
      break;  // a grandchild may hold the pipes open; stop reading
    }
    const auto until = term_sent ? kill_deadline : deadline;
    const auto wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
    const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(wait_ms, 1000)));
    if (n < 0 && errno != EINTR) break;
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
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_status = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace hpctrain::common
