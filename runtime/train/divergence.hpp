// The divergence guard (torch-free): judges each closed log window's loss (the mean over the
// window's steps and the ranks, the same number on every rank, so every rank reaches the same
// verdict at the same step with no message) and says when the run diverged:
//   - a non-finite loss in fp32 or bf16 (in fp16 the loss scaler skips such steps);
//   - a loss spike_factor times the median of the last kHistory windows, once kHistory windows are
//     known (resilience.loss_spike_factor; 0 = off);
//   - in fp16, the scaler skipping every step for fp16_skip_limit steps in a row (each skip halves
//     the scale, so a window of n steps that ends with the scale 2^-n of the one before skipped
//     every one of them; resilience.fp16_skip_limit, 0 = off).
// The worker then stops every rank with kExitDiverged (docs/resilience.md).
// Thread safety: none; the training thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct DivergenceOptions {
  bool fp16 = false;
  double spike_factor = 0;
  int64_t fp16_skip_limit = 0;
  double backoff_factor = 0.5;  // the loss scaler's
};
DivergenceOptions divergence_options_from_spec(const spec::Spec& spec);

class DivergenceGuard {
 public:
  static constexpr size_t kHistory = 8;

  explicit DivergenceGuard(DivergenceOptions options) : o_(options) {}

  // The window of steps first_step..last_step closed with `mean_loss` and the loss scale
  // `loss_scale` at its end (1 outside fp16). The verdict when the run diverged, else nullopt.
  std::optional<std::string> watch(int64_t first_step, int64_t last_step, double mean_loss,
                                   double loss_scale);
  // fp16: a non-finite loss is the loss scaler's, not a divergence.
  bool fp16() const { return o_.fp16; }
  // The first step of what diverged, for a verdict on the window first_step..last_step: the
  // window's, or, where the scaler skipped steps in a row through it, the first of that streak
  // (a rollback restores a checkpoint before it: one saved inside the streak holds a scale
  // backed off as many times, which would take thousands of steps to grow back).
  int64_t offending_from(int64_t first_step, int64_t last_step) const {
    return skipped_ > 0 ? std::min(first_step, last_step - skipped_ + 1) : first_step;
  }
  // The run rolled back to a checkpoint: the loss scale starts again from the checkpoint's, so
  // the skip streak starts over. The recent windows' losses, from before the verdict, stay.
  void rolled_back() {
    scale_.reset();
    skipped_ = 0;
  }

 private:
  DivergenceOptions o_;
  std::deque<double> recent_;    // the last kHistory windows' losses
  std::optional<double> scale_;  // the loss scale at the end of the window before
  int64_t skipped_ = 0;          // steps skipped in a row, through the last window
};

}  // namespace hpctrain::train
