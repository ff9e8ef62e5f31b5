// Dynamic loss scaling for fp16 training, as torch.amp.GradScaler does it, on ATen's AMP kernels:
// the loss is multiplied by the scale before backward; after backward (and the gradient
// all-reduce) unscale() divides every gradient by the scale and reports whether any is inf/NaN;
// a step with inf/NaN is skipped and the scale backs off (x backoff_factor), and after
// growth_interval clean steps in a row it grows (x growth_factor). libtorch has autocast but no
// C++ GradScaler, hence this one.
//
// Every rank must take the same decision. The gradients are all-reduced before unscale(), so an
// inf on one rank is an inf on all; the trainer still all-reduces the verdict with the step's
// other agreements (found_inf_ is a tensor so that costs no extra collective).
// State (scale, growth tracker) is exposed for checkpoints.
// Thread safety: training thread only.
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace hpctrain::train {

struct GradScalerConfig {
  double init_scale = 65536.0;  // torch.amp.GradScaler's defaults
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

struct GradScalerState {
  double scale = 0;
  int64_t growth_tracker = 0;  // clean steps in a row since the last change
};

class GradScaler {
 public:
  GradScaler(GradScalerConfig config, const at::Device& device);

  // loss x scale.
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides every defined gradient by the scale in place; returns a one-element float tensor,
  // 1 if some gradient held inf or NaN, else 0 (not yet agreed across ranks).
  at::Tensor unscale(const std::vector<at::Tensor>& params);
  // After the ranks agreed on `found_inf` (> 0: skip): backs off or counts toward growth.
  void update(const at::Tensor& found_inf);

  double current_scale() const;
  // The scale and the growth tracker, on the device (updated in place, never re-made).
  std::pair<at::Tensor, at::Tensor> tensors() const { return {scale_, growth_tracker_}; }
  GradScalerState state() const;
  void load_state(const GradScalerState& state);

 private:
  GradScalerConfig config_;
  at::Tensor scale_;           // float32, one element, on the device
  at::Tensor growth_tracker_;  // int32, one element, on the device
};

}  // namespace hpctrain::train
