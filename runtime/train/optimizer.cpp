#include "train/optimizer.hpp"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "common/error.hpp"
#include "spec/spec.hpp"

namespace hpctrain::train {
namespace {

// Groups of (params, weight decay): one group, or decayed and exempt ones.
std::vector<std::pair<std::vector<at::Tensor>, double>> groups(const spec::Spec& spec,
                                                               const NamedParams& params) {
  const double wd = spec.train.optimizer.weight_decay;
  std::vector<at::Tensor> decayed, exempt;
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    (spec.train.optimizer.decay_bn_bias || p.dim() > 1 ? decayed : exempt).push_back(p);
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

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const spec::Spec& spec,
                                                        const NamedParams& params, double lr) {
  const auto& o = spec.train.optimizer;
  std::vector<torch::optim::OptimizerParamGroup> param_groups;
  switch (o.name) {
    case spec::Optimizer::kSgd: {
      for (auto& [tensors, wd] : groups(spec, params)) {
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
      for (auto& [tensors, wd] : groups(spec, params)) {
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

}  // namespace hpctrain::train
