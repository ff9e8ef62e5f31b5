// Elapsed time on the monotonic clock, for progress figures and deadlines.
// Thread safety: reentrant.
#pragma once

#include <chrono>

namespace hpctrain {

using Clock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace hpctrain
