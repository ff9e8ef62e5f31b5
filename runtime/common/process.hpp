// Runs a program by argv (never through a shell) with a deadline, capturing stdout and stderr.
// Thread safety: reentrant; each call owns its child.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace hpctrain::common {

struct CommandResult {
  int exit_status = -1;  // exit code, or 128 + signal when killed by one
  bool timed_out = false;
  bool not_found = false;  // the program could not be executed
  std::string out, err;
};

// Runs argv[0] (looked up on PATH) with `timeout`; on timeout the child gets SIGTERM, then SIGKILL
// two seconds later. Output beyond `max_output` bytes per stream is dropped.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          size_t max_output = 1 << 20);

}  // namespace hpctrain::common
