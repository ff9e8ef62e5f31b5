#include "preempt/time_limit.hpp"

namespace hpctrain::preempt {

double seconds_needed_to_stop(double last_save_seconds, double step_seconds) {
  return 2 * last_save_seconds + 3 * step_seconds + 30;
}

bool time_limit_near(double seconds_left, double last_save_seconds, double step_seconds) {
  return seconds_left < seconds_needed_to_stop(last_save_seconds, step_seconds);
}

}  // namespace hpctrain::preempt
