#include "dist/stack_dump.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include "common/error.hpp"
#include "common/process.hpp"

namespace hpctrain::dist {

std::string thread_stacks(std::chrono::seconds deadline, const std::string& gdb) {
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  const auto r = common::run_command({gdb, "-p", std::to_string(::getpid()), "-batch", "-nx", "-ex",
                                      "set pagination off", "-ex", "thread apply all bt"},
                                     deadline, 1 << 20);
  if (r.not_found) return rt::rank_prefix() + "no stacks: " + gdb + " is not on PATH\n";
  std::string dump = rt::rank_prefix() + "the threads of this rank, as gdb sees them:\n" + r.out;
  if (r.exit_status != 0 || r.timed_out) {
    dump += rt::rank_prefix() + "gdb " +
            (r.timed_out ? "timed out" : "exited " + std::to_string(r.exit_status)) + ": " +
            r.err.substr(0, r.err.find('\n')) + "\n";
  }
  return dump;
}

void print_thread_stacks() {
  const std::string dump = thread_stacks();
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, dump.data(), dump.size());
}

}  // namespace hpctrain::dist
