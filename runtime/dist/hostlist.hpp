// Slurm hostlists: "node[001-004,007],gpu-a[1-2]-b[3,5],login1" <-> the names, in the order
// `scontrol show hostnames` gives them, rejecting what scontrol rejects.
// Thread safety: pure functions.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace hpctrain::dist {

class HostlistError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Expands a hostlist expression. Throws HostlistError (naming the expression and the problem) on
// malformed input: unbalanced brackets, empty ranges, reversed ranges, non-numeric bounds, more
// than `max_hosts` names (a guard against "n[0-999999999]").
std::vector<std::string> expand_hostlist(const std::string& expression, size_t max_hosts = 1 << 20);

}  // namespace hpctrain::dist
