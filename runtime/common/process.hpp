// Starting programs, the one way hpctrain does it: by argv (never through a shell), looked up on
// PATH. `Process` is a started child to poll, signal and wait for with a deadline (the step
// supervisor's srun, a scancel nobody waits for); `run_command` runs one to its end with a
// deadline, capturing what it prints (Slurm's client programs, lfs, gdb). Thread safety: a Process
// belongs to one thread; run_command is reentrant (each call owns its child).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace hpctrain::common {

// What a child's standard stream is connected to. kPipe is for stdout and stderr only: the
// parent reads them through Process::out_fd() and err_fd().
enum class Stdio { kInherit, kNull, kPipe };

struct ProcessOptions {
  // The child's whole environment, "NAME=value" each; nullopt: this process's.
  std::optional<std::vector<std::string>> env;
  Stdio in = Stdio::kInherit, out = Stdio::kInherit, err = Stdio::kInherit;
  // Descriptors of this process that become the child's stdin and stdout, in place of `in` and
  // `out` (a file to send or to fill, a pipe this process ends by closing its other end); -1:
  // none. They stay open here: the caller closes them.
  int stdin_from = -1, stdout_to = -1;
};

// This process's environment with each of `set` ("NAME=value") in place of the variable of that
// name, or added where there is none.
std::vector<std::string> environment_with(const std::vector<std::string>& set);

// The status of a program that could not be started, as a shell gives it.
inline constexpr int kStatusNotStarted = 127;

class Process {
 public:
  // Starts argv[0]. A program that cannot be started is not an exception: started() is false,
  // error() says why and the status is kStatusNotStarted. Throws std::invalid_argument on an
  // empty argv or a piped stdin, std::system_error when no pipe can be made.
  explicit Process(const std::vector<std::string>& argv, const ProcessOptions& options = {});
  // A child still running is killed (SIGKILL) and reaped, unless detach()ed.
  ~Process();
  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }  // -1 when not started
  // Why it could not be started (strerror's words); empty when it was.
  const std::string& error() const { return error_; }
  // The read ends of the kPipe streams (owned here), else -1.
  int out_fd() const { return out_.get(); }
  int err_fd() const { return err_.get(); }

  // The exit status once the child has ended, without waiting: its exit code, or 128 + the signal
  // that ended it (as a shell says).
  std::optional<int> poll();
  // The exit status once the child ends within `timeout`; nullopt while it runs on. Signals do
  // not cut the wait short.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  int wait();
  // Sends `sig` to the child unless it has been reaped (its pid may be another's by then).
  void signal(int sig);
  // Leaves the child to itself: neither killed nor reaped by this object (once ended, it stays
  // a zombie until this program ends).
  void detach() { detached_ = true; }

 private:
  void reap_or_kill();

  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string error_;
  UniqueFd out_, err_;
  bool detached_ = false;
};

struct CommandResult {
  int exit_status = -1;  // exit code, or 128 + signal when killed by one
  bool timed_out = false;
  bool not_found = false;  // the program could not be executed
  std::string out, err;
};

// Runs argv[0] (looked up on PATH) with `timeout`, stdin from /dev/null; on timeout the child
// gets SIGTERM, then SIGKILL two seconds later. Output beyond `max_output` bytes per stream is
// dropped.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          size_t max_output = 1 << 20);

}  // namespace hpctrain::common
