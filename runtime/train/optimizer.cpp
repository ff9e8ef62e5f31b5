#include "train/optimizer.hpp"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>

#include "common/error.hpp"
#include "spec/spec.hpp"
#include "train/restore.hpp"

namespace hpctrain::train {
namespace {

// Groups of (params, weight decay `wd`): one group, or decayed and exempt ones (parameters of
// one dimension, unless `decay_bn_bias`).
std::vector<std::pair<std::vector<at::Tensor>, double>> groups(double wd, bool decay_bn_bias,
                                                               const NamedParams& params) {
  std::vector<at::Tensor> decayed, exempt;
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    (decay_bn_bias || p.dim() > 1 ? decayed : exempt).push_back(p);
  }
  std::vector<std::pair<std::vector<at::Tensor>, double>> out;
  if (!decayed.empty()) out.emplace_back(std::move(decayed), wd);
  if (!exempt.empty()) out.emplace_back(std::move(exempt), 0.0);
  if (out.empty()) {
    HPCTRAIN_THROW(rt::Error, "no parameter requires a gradient: model.freeze froze everything");
  }
  return out;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> optimizer_from_spec(const spec::Spec& spec,
                                                             const NamedParams& params, double lr) {
  const auto& o = spec.train.optimizer;
  std::vector<torch::optim::OptimizerParamGroup> param_groups;
  switch (o.name) {
    case spec::Optimizer::kSgd: {
      for (auto& [tensors, wd] : groups(o.weight_decay, o.decay_bn_bias, params)) {
        param_groups.emplace_back(
            tensors, std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(lr)
                                                                    .momentum(o.momentum)
                                                                    .nesterov(o.nesterov)
                                                                    .weight_decay(wd)));
      }
      torch::optim::SGDOptions defaults(lr);
      defaults.momentum(o.momentum).nesterov(o.nesterov);
      if (o.nesterov && o.momentum <= 0) {
        HPCTRAIN_THROW(rt::Error, "train.optimizer.nesterov needs a momentum above 0");
      }
      return std::make_unique<torch::optim::SGD>(param_groups, defaults);
    }
    case spec::Optimizer::kAdamW: {
      const auto betas = std::make_tuple(o.betas.at(0), o.betas.at(1));
      for (auto& [tensors, wd] : groups(o.weight_decay, o.decay_bn_bias, params)) {
        param_groups.emplace_back(
            tensors, std::make_unique<torch::optim::AdamWOptions>(
                         torch::optim::AdamWOptions(lr).betas(betas).eps(o.eps).weight_decay(wd)));
      }
      return std::make_unique<torch::optim::AdamW>(
          param_groups, torch::optim::AdamWOptions(lr).betas(betas).eps(o.eps));
    }
  }
  HPCTRAIN_THROW(rt::Error, "unknown optimizer");
}

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

std::vector<std::pair<std::string, at::Tensor>> optimizer_state(
    const torch::optim::Optimizer& optimizer, const NamedParams& params) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  const auto& state = optimizer.state();
  for (const auto& [name, p] : params) {
    auto it = state.find(p.unsafeGetTensorImpl());
    if (it == state.end()) continue;
    if (const auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
      if (sgd->momentum_buffer().defined()) {
        out.emplace_back(name + ".momentum_buffer", sgd->momentum_buffer());
      }
    } else if (const auto* adamw =
                   dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
      out.emplace_back(name + ".step", at::scalar_tensor(adamw->step(), at::kLong));
      out.emplace_back(name + ".exp_avg", adamw->exp_avg());
      out.emplace_back(name + ".exp_avg_sq", adamw->exp_avg_sq());
    }
  }
  return out;
}

void load_optimizer_state(torch::optim::Optimizer& optimizer, const NamedParams& params,
                          const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::map<std::string, at::Tensor> entries(state.begin(), state.end());
  const bool adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  auto take = [&](const std::string& key, const at::Tensor& like) -> at::Tensor {
    auto it = entries.find(key);
    if (it == entries.end()) return {};
    at::Tensor t = it->second;
    entries.erase(it);
    // The parameter's whole layout (channels_last strides included): the fused kernels need it.
    return like.defined() ? restored_like(t, like, "optimizer state " + key) : t;
  };
  optimizer.state().clear();
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    void* key = p.unsafeGetTensorImpl();
    if (adamw) {
      at::Tensor step = take(name + ".step", {});
      at::Tensor exp_avg = take(name + ".exp_avg", p);
      at::Tensor exp_avg_sq = take(name + ".exp_avg_sq", p);
      if (!step.defined()) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(step.item<int64_t>());
      s->exp_avg(exp_avg);
      s->exp_avg_sq(exp_avg_sq);
      optimizer.state()[key] = std::move(s);
    } else {
      at::Tensor buffer = take(name + ".momentum_buffer", p);
      if (!buffer.defined()) continue;
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(buffer);
      optimizer.state()[key] = std::move(s);
    }
  }
  if (!entries.empty()) {
    HPCTRAIN_THROW(rt::Error, "optimizer state has " + std::to_string(entries.size()) +
                                  " entries for no trainable parameter, e.g. " +
                                  entries.begin()->first +
                                  " (another model, optimizer or model.freeze)");
  }
}

}  // namespace hpctrain::train
