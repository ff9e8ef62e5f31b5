// The learning rate at every optimizer step: linear warmup, then constant, cosine, step or
// multistep decay, from a base learning rate that the linear scaling rule (Goyal et al. 2017)
// derives from the global batch. Values match PyTorch's LinearLR(start_factor = 1/W, total_iters
// = W - 1) followed by CosineAnnealingLR / StepLR / MultiStepLR stepped once per optimizer step
// (tests/unit/train checks both the closed forms and torch.optim.lr_scheduler).
// Thread safety: immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "spec/choices.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct ScheduleConfig {
  spec::Schedule kind = spec::Schedule::kConstant;
  double base_lr = 0;        // after scaling
  int64_t warmup_steps = 0;  // the lr climbs linearly to base_lr over these steps
  int64_t total_steps = 0;   // the run's optimizer steps (cosine ends here)
  int64_t steps_per_epoch = 0;
  int64_t step_size_epochs = 0;           // kStep
  std::vector<int64_t> milestone_epochs;  // kMultistep
  double gamma = 1;                       // kStep, kMultistep
  double min_lr = 0;                      // kCosine
};

// [train.schedule] and train.optimizer.lr, with the run's length: base_lr = lr x global_batch /
// reference_batch when scale_lr; warmup_epochs and the decay epochs turned into steps.
ScheduleConfig schedule_config_from_spec(const spec::Spec& spec, int64_t global_batch,
                                         int64_t steps_per_epoch, int64_t total_steps);

class LrSchedule {
 public:
  explicit LrSchedule(ScheduleConfig config);  // throws rt::Error on an impossible config
  // The learning rate of optimizer step `step` (0-based).
  double lr_at(int64_t step) const;
  const ScheduleConfig& config() const { return config_; }

 private:
  ScheduleConfig config_;
};

}  // namespace hpctrain::train
