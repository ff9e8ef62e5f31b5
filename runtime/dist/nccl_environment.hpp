// The environment c10d's ProcessGroupNCCL reads when it is created, as hpctrain wants it: what
// dist/nccl_backend.cpp sets before creating the process group. Torch-free and compiled in every
// build, so the rule is tested where there is no CUDA.
// Thread safety: a pure function.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "dist/world.hpp"

namespace hpctrain::dist {

// The variables to set (name, value), overwriting, given the collective deadline and the current
// environment `env`:
//   - TORCH_NCCL_ASYNC_ERROR_HANDLING=2 (CleanUpOnly), always: a collective past the deadline
//     aborts the communicators and leaves the process to hpctrain, which names the lost rank;
//     c10d's default (3) dies of SIGABRT first.
//   - TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC = max(480, deadline + 120 s), unless `env` sets it (an
//     empty value counts as unset): c10d's monitor kills a stuck watchdog only after the
//     collective deadline, never before it.
std::vector<std::pair<std::string, std::string>> nccl_environment(
    std::chrono::milliseconds collective_deadline, const EnvMap& env);

}  // namespace hpctrain::dist
