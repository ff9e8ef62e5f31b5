#include "train/save_policy.hpp"

#include "preempt/time_limit.hpp"

namespace hpctrain::train {

SavePolicy::SavePolicy(const SavePolicyOptions& options, double now_s)
    : options_(options), last_save_began_s_(now_s) {}

SaveRequest SavePolicy::request(double now_s, int64_t unix_now, double step_seconds) const {
  SaveRequest r;
  const double minutes = options_.every_minutes;
  r.save_now = minutes > 0 && now_s - last_save_began_s_ >= minutes * 60;
  if (options_.job_end_time) {
    const double left = static_cast<double>(*options_.job_end_time - unix_now);
    r.deadline = preempt::time_limit_near(left, last_save_seconds_, step_seconds);
  }
  return r;
}

SaveKind SavePolicy::at_step_end(int64_t step, int64_t total_steps, bool stopping, bool save_now,
                                 int64_t gathered_at) const {
  if (stopping) return SaveKind::kBlocking;
  if (step >= total_steps) return SaveKind::kNone;
  const int64_t every = options_.every_steps;
  const bool due = (every > 0 && step % every == 0) || (save_now && gathered_at >= last_save_step_);
  if (!due) return SaveKind::kNone;
  return options_.async ? SaveKind::kBackground : SaveKind::kBlocking;
}

void SavePolicy::began(int64_t step, double now_s) {
  last_save_step_ = step;
  last_save_began_s_ = now_s;
}

}  // namespace hpctrain::train
