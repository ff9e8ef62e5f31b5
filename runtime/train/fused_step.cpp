#include "train/fused_step.hpp"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "common/error.hpp"
#include "train/restore.hpp"

namespace hpctrain::train {

FusedStep::FusedStep(torch::optim::Optimizer& optimizer, const NamedParams& params)
    : optimizer_(optimizer) {
  for (const auto& [name, p] : params) names_[p.unsafeGetTensorImpl()] = name;
  adamw_ = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  if (!adamw_ && dynamic_cast<torch::optim::SGD*>(&optimizer) == nullptr) {
    HPCTRAIN_THROW(rt::Error, "the fused optimizer step knows SGD and AdamW only");
  }
  reload_state();
}

at::Tensor& FusedStep::step_tensor(const at::Tensor& param) {
  void* key = param.unsafeGetTensorImpl();
  for (auto& [k, t] : steps_) {
    if (k == key) return t;
  }
  steps_.emplace_back(key, at::zeros({}, param.options().dtype(at::kFloat)));
  return steps_.back().second;
}

void FusedStep::reload_state() {
  checked_ = false;
  if (!adamw_) return;
  for (auto& [key, t] : steps_) t.zero_();  // no state restored for it: a fresh count
  for (auto& group : optimizer_.param_groups()) {
    for (auto& p : group.params()) {
      auto it = optimizer_.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer_.state().end()) continue;
      const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
      step_tensor(p).fill_(static_cast<double>(s.step()));
    }
  }
}

std::vector<at::Tensor> FusedStep::step_counts() const {
  std::vector<at::Tensor> out;
  for (const auto& [key, t] : steps_) out.push_back(t);
  return out;
}

void FusedStep::flush_state() {
  if (!adamw_) return;
  for (auto& group : optimizer_.param_groups()) {
    for (auto& p : group.params()) {
      auto it = optimizer_.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer_.state().end()) continue;
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      s.step(static_cast<int64_t>(std::llround(step_tensor(p).item<double>())));
    }
  }
}

namespace {

// One parameter group's tensors for the fused kernels.
struct GroupTensors {
  std::vector<at::Tensor> params, grads, bufs, exp_avgs, exp_avg_sqs, steps;
};

// AdamW over a group: with the learning rate as a tensor when `lr` is defined, else the group's.
void adamw_kernel(GroupTensors& t, const torch::optim::AdamWOptions& o, const at::Tensor& lr,
                  const std::optional<at::Tensor>& inf) {
  // As torch.optim's fused path: the counts advance before the kernel, which reads them, and go
  // back where the step was skipped.
  at::_foreach_add_(t.steps, 1);
  const auto [beta1, beta2] = o.betas();
  if (lr.defined()) {
    at::_fused_adamw_(t.params, t.grads, t.exp_avgs, t.exp_avg_sqs, /*max_exp_avg_sqs=*/{}, t.steps,
                      lr, beta1, beta2, o.weight_decay(), o.eps(), /*amsgrad=*/false,
                      /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
  } else {
    at::_fused_adamw_(t.params, t.grads, t.exp_avgs, t.exp_avg_sqs, /*max_exp_avg_sqs=*/{}, t.steps,
                      o.lr(), beta1, beta2, o.weight_decay(), o.eps(), /*amsgrad=*/false,
                      /*maximize=*/false, /*grad_scale=*/std::nullopt, inf);
  }
  if (inf) {
    const std::vector<at::Tensor> skipped(t.steps.size(), inf->reshape({}));
    at::_foreach_sub_(t.steps, skipped);
  }
}

void sgd_kernel(GroupTensors& t, const torch::optim::SGDOptions& o, const at::Tensor& lr,
                const std::optional<at::Tensor>& inf) {
  if (lr.defined()) {
    at::_fused_sgd_(t.params, t.grads, t.bufs, o.weight_decay(), o.momentum(), lr, o.dampening(),
                    o.nesterov(), /*maximize=*/false, /*is_first_step=*/false,
                    /*grad_scale=*/std::nullopt, inf);
  } else {
    at::_fused_sgd_(t.params, t.grads, t.bufs, o.weight_decay(), o.momentum(), o.lr(),
                    o.dampening(), o.nesterov(), /*maximize=*/false, /*is_first_step=*/false,
                    /*grad_scale=*/std::nullopt, inf);
  }
}

}  // namespace

void FusedStep::check_group(const std::vector<at::Tensor>& params,
                            const std::vector<at::Tensor>& grads,
                            const std::vector<at::Tensor>& bufs,
                            const std::vector<at::Tensor>& exp_avgs,
                            const std::vector<at::Tensor>& exp_avg_sqs) const {
  std::vector<std::string> names;
  for (const auto& p : params) {
    auto it = names_.find(p.unsafeGetTensorImpl());
    names.push_back(it != names_.end() ? it->second : "parameter " + std::to_string(names.size()));
  }
  if (adamw_) {
    check_fused_inputs({params, grads, exp_avgs, exp_avg_sqs},
                       {"parameter", "gradient", "exp_avg", "exp_avg_sq"}, names);
  } else if (!bufs.empty()) {
    check_fused_inputs({params, grads, bufs}, {"parameter", "gradient", "momentum_buffer"}, names);
  } else {
    check_fused_inputs({params, grads}, {"parameter", "gradient"}, names);
  }
}

void FusedStep::step(const at::Tensor& found_inf, const at::Tensor& lr) {
  at::NoGradGuard no_grad;
  const std::optional<at::Tensor> inf =
      found_inf.defined() ? std::optional<at::Tensor>(found_inf) : std::nullopt;
  for (auto& group : optimizer_.param_groups()) {
    GroupTensors t;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      t.params.push_back(p);
      t.grads.push_back(p.grad());
      auto& state = optimizer_.state();
      auto it = state.find(p.unsafeGetTensorImpl());
      if (adamw_) {
        if (it == state.end()) {
          auto s = std::make_unique<torch::optim::AdamWParamState>();
          s->step(0);
          s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          it = state.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
        }
        auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
        t.exp_avgs.push_back(s.exp_avg());
        t.exp_avg_sqs.push_back(s.exp_avg_sq());
        t.steps.push_back(step_tensor(p));
      } else if (static_cast<const torch::optim::SGDOptions&>(group.options()).momentum() != 0) {
        if (it == state.end()) {
          auto s = std::make_unique<torch::optim::SGDParamState>();
          s->momentum_buffer(at::zeros_like(p, at::MemoryFormat::Preserve));
          it = state.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
        }
        t.bufs.push_back(static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer());
      }
    }
    if (t.params.empty()) continue;
    if (!checked_) check_group(t.params, t.grads, t.bufs, t.exp_avgs, t.exp_avg_sqs);
    if (adamw_) {
      adamw_kernel(t, static_cast<const torch::optim::AdamWOptions&>(group.options()), lr, inf);
    } else {
      sgd_kernel(t, static_cast<const torch::optim::SGDOptions&>(group.options()), lr, inf);
    }
  }
  checked_ = true;
}

void clip_grad_norm_on_device(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return;
  const std::vector<at::Tensor> norms = at::_foreach_norm(grads, 2);
  const at::Tensor total = at::stack(norms).norm(2);
  const at::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  at::_foreach_mul_(grads, coef);
}

}  // namespace hpctrain::train
