// Slurm hostlists: "node[001-004,007],gpu-a[1-2]-b[3,5],login1" <-> the names, in the order
// `scontrol show hostnames` gives them, rejecting what scontrol rejects.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/error.hpp"

namespace hpctrain::dist {

// A malformed hostlist; a launch-environment error, since hostlists come from Slurm's variables.
class HostlistError : public rt::EnvError {
 public:
  using rt::EnvError::EnvError;
};

// Expands a hostlist expression. Throws HostlistError (naming the expression and the problem) on
// malformed input: unbalanced brackets, empty ranges, reversed ranges, non-numeric bounds, more
// than `max_hosts` names (a guard against "n[0-999999999]").
std::vector<std::string> expand_hostlist(const std::string& expression, size_t max_hosts = 1 << 20);

// A node list as Slurm itself writes SLURM_JOB_NODELIST and SLURM_STEP_NODELIST
// ("node[01-03,7],gpu1"), expanded. Stricter than expand_hostlist, which copies scontrol's
// leniency: an expression that is empty, has an empty name ("a,,b", a trailing ','), a '[' without
// ']' (scontrol turns "node[1-3" into a host "node]"), a ']' without '[', nested brackets or
// blanks is refused, since Slurm never writes one and a host made up from it would put ranks on a
// node that does not exist. Throws HostlistError naming the expression and the problem.
std::vector<std::string> expand_nodelist(const std::string& expression, size_t max_hosts = 1 << 20);

}  // namespace hpctrain::dist
