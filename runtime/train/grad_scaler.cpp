#include "train/grad_scaler.hpp"

#include <ATen/ATen.h>

namespace hpctrain::train {

GradScaler::GradScaler(GradScalerConfig config, const at::Device& device)
    : config_(config),
      scale_(
          at::full({1}, config.init_scale, at::TensorOptions().dtype(at::kFloat).device(device))),
      growth_tracker_(at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(device))) {}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  return loss * scale_.to(loss.scalar_type());
}

at::Tensor GradScaler::unscale(const std::vector<at::Tensor>& params) {
  at::Tensor found_inf = at::zeros({1}, scale_.options());
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  // One fused call per (device, dtype) group, as torch.amp does.
  std::vector<at::Tensor> fp32, other;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    (p.grad().scalar_type() == at::kFloat ? fp32 : other).push_back(p.grad());
  }
  for (auto* group : {&fp32, &other}) {
    if (!group->empty())
      at::_amp_foreach_non_finite_check_and_unscale_(*group, found_inf, inv_scale);
  }
  return found_inf;
}

void GradScaler::update(const at::Tensor& found_inf) {
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf.clamp_max(1).to(at::kFloat),
                         config_.growth_factor, config_.backoff_factor, config_.growth_interval);
}

double GradScaler::current_scale() const { return scale_.item<double>(); }

GradScalerState GradScaler::state() const {
  return {scale_.item<double>(), growth_tracker_.item<int64_t>()};
}

void GradScaler::load_state(const GradScalerState& state) {
  scale_.fill_(state.scale);
  growth_tracker_.fill_(state.growth_tracker);
}

}  // namespace hpctrain::train
