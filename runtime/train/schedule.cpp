#include "train/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.hpp"
#include "spec/spec.hpp"

namespace hpctrain::train {

ScheduleConfig schedule_config_from_spec(const spec::Spec& spec, int64_t global_batch,
                                         int64_t steps_per_epoch, int64_t total_steps) {
  const auto& s = spec.train.schedule;
  ScheduleConfig c;
  c.kind = s.name;
  c.base_lr = spec.train.optimizer.lr;
  if (s.scale_lr) {
    c.base_lr *= static_cast<double>(global_batch) / static_cast<double>(s.reference_batch);
  }
  c.steps_per_epoch = steps_per_epoch;
  c.total_steps = total_steps;
  c.warmup_steps =
      std::min(total_steps, static_cast<int64_t>(std::llround(s.warmup_epochs * steps_per_epoch)));
  c.step_size_epochs = s.step_size;
  c.milestone_epochs = s.milestones;
  c.gamma = s.gamma;
  c.min_lr = s.min_lr;
  return c;
}

LrSchedule::LrSchedule(ScheduleConfig config) : config_(std::move(config)) {
  if (config_.steps_per_epoch < 1 || config_.total_steps < 1 || config_.warmup_steps < 0 ||
      config_.warmup_steps > config_.total_steps || !(config_.base_lr >= 0)) {
    HPCTRAIN_THROW(rt::Error, "learning-rate schedule: " + std::to_string(config_.total_steps) +
                                  " steps of " + std::to_string(config_.steps_per_epoch) +
                                  " per epoch with " + std::to_string(config_.warmup_steps) +
                                  " warmup steps and base lr " + std::to_string(config_.base_lr) +
                                  " is impossible");
  }
}

double LrSchedule::lr_at(int64_t step) const {
  const ScheduleConfig& c = config_;
  if (step < c.warmup_steps) {
    return c.base_lr * static_cast<double>(step + 1) / static_cast<double>(c.warmup_steps);
  }
  // Decay epochs count optimizer steps, as PyTorch's schedulers stepped every iteration with
  // step_size and milestones in iterations would.
  const int64_t epoch = step / c.steps_per_epoch;
  switch (c.kind) {
    case spec::Schedule::kConstant:
      return c.base_lr;
    case spec::Schedule::kCosine: {
      const int64_t span = c.total_steps - c.warmup_steps;
      if (span <= 0) return c.base_lr;
      const double t = static_cast<double>(step - c.warmup_steps) / static_cast<double>(span);
      return c.min_lr + (c.base_lr - c.min_lr) * 0.5 * (1.0 + std::cos(M_PI * t));
    }
    case spec::Schedule::kStep:
      return c.base_lr * std::pow(c.gamma, static_cast<double>(epoch / c.step_size_epochs));
    case spec::Schedule::kMultistep: {
      const auto passed = std::count_if(c.milestone_epochs.begin(), c.milestone_epochs.end(),
                                        [&](int64_t m) { return epoch >= m; });
      return c.base_lr * std::pow(c.gamma, static_cast<double>(passed));
    }
  }
  return c.base_lr;
}

}  // namespace hpctrain::train
