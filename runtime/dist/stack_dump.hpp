// The threads' stacks of this process as gdb sees them, for a rank named in a hang verdict
// (dist/hang_watchdog.hpp, docs/resilience.md "Hangs"): what the people who read the log need to
// see where it is stuck. gdb attaches from a child with a deadline; without gdb, or when it fails,
// the text says so. Torch-free.
// Thread safety: reentrant; the other threads of the process are stopped while gdb is attached.
#pragma once

#include <chrono>
#include <string>

namespace hpctrain::dist {

// How long gdb may take to print the stacks; the ranks that wait for a named rank's stacks wait
// this long and a little more.
inline constexpr std::chrono::seconds kStackDumpDeadline{60};

// "[rank r/N host] the threads of this rank, as gdb sees them:" and gdb's `thread apply all bt`,
// then a line when gdb failed or timed out (with the first line of its stderr); or one line saying
// that `gdb` (the program run, looked up on PATH) is not there. Allows any process to trace this
// one first (PR_SET_PTRACER), as Yama's ptrace_scope 1 requires for gdb in a child.
std::string thread_stacks(std::chrono::seconds deadline = kStackDumpDeadline,
                          const std::string& gdb = "gdb");

// thread_stacks() on stderr, in one write(2) (no stdio: the process is about to _exit).
void print_thread_stacks();

}  // namespace hpctrain::dist
