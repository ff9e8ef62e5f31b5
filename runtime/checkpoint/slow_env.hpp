// An Env that passes every operation to another and makes each file's fsync take `seconds`
// longer: a slow parallel filesystem, for the tests of what a long save changes (the time-limit
// rule plans the last save from how long saves take: train/save_policy.hpp). The worker uses it
// only when HPCTRAIN_TEST_SLOW_FSYNC is set.
// Thread safety: as the Env it wraps; the delay is a plain sleep on the calling thread.
#pragma once

#include <memory>

#include "checkpoint/env.hpp"

namespace hpctrain::checkpoint {

// `base` must outlive the returned Env.
std::unique_ptr<Env> slow_fsync_env(Env& base, double seconds);

}  // namespace hpctrain::checkpoint
