#include "train/local_sgd.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <memory>

#include "common/error.hpp"
#include "train/restore.hpp"

namespace hpctrain::train {

LocalSgd::LocalSgd(NamedTensors params, NamedTensors buffers, dist::Communicator& comm,
                   LocalSgdOptions options)
    : params_(std::move(params)), comm_(comm), options_(options) {
  if (options_.every_steps < 1) {
    HPCTRAIN_THROW(rt::Error, "train.sync_every_steps must be at least 1");
  }
  for (auto& [name, b] : buffers) {
    if (at::isFloatingType(b.scalar_type())) buffers_.emplace_back(name, b);
  }
}

void LocalSgd::start_local_step() {
  if (options_.outer == spec::OuterOptimizer::kNesterov && anchor_.empty()) {
    torch::NoGradGuard no_grad;
    for (const auto& [name, p] : params_) anchor_.push_back(p.detach().clone());
  }
  ++local_steps_;
}

void LocalSgd::synchronize() {
  torch::NoGradGuard no_grad;
  // The parameters and buffers in one flat buffer per dtype, all-reduced together.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
  for (const auto& [name, p] : params_) by_type[p.scalar_type()].push_back(p.detach());
  for (const auto& [name, b] : buffers_) by_type[b.scalar_type()].push_back(b.detach());
  std::vector<std::pair<at::Tensor, std::unique_ptr<dist::Work>>> flats;
  for (auto& [type, group] : by_type) {
    std::vector<at::Tensor> views;
    for (const auto& t : group) views.push_back(t.reshape({-1}));
    at::Tensor flat = torch::cat(views);
    bytes_averaged_ += flat.numel() * flat.element_size();
    auto work = comm_.all_reduce_async(flat);
    flats.emplace_back(std::move(flat), std::move(work));
  }
  size_t g = 0;
  for (auto& [type, group] : by_type) {
    auto& [flat, work] = flats[g++];
    work->wait();
    flat.div_(comm_.size());
    int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
  if (options_.outer == spec::OuterOptimizer::kNesterov) {
    if (anchor_.size() != params_.size()) {
      HPCTRAIN_THROW(rt::Error, "local SGD: an outer step without an anchor (no local step yet)");
    }
    // torch.optim.SGD(nesterov=True, dampening=0) on the outer gradient anchor - mean: its
    // momentum buffer starts as a copy of the first gradient.
    const bool first = momentum_.empty();
    const double mu = options_.outer_momentum;
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor p = params_[i].second.detach();
      at::Tensor delta = anchor_[i] - p;
      if (first) {
        momentum_.push_back(delta.clone());
      } else {
        momentum_[i].mul_(mu).add_(delta);
      }
      delta.add_(momentum_[i], mu);
      anchor_[i].sub_(delta, options_.outer_lr);
      p.copy_(anchor_[i]);
    }
  }
  local_steps_ = 0;
  ++synchronizations_;
}

NamedTensors LocalSgd::state() const {
  NamedTensors out;
  out.emplace_back("local_steps", at::scalar_tensor(local_steps_, at::kLong));
  for (size_t i = 0; i < anchor_.size(); ++i) {
    out.emplace_back("anchor." + params_[i].first, anchor_[i]);
  }
  for (size_t i = 0; i < momentum_.size(); ++i) {
    out.emplace_back("momentum." + params_[i].first, momentum_[i]);
  }
  return out;
}

void LocalSgd::load_state(const NamedTensors& state, const std::vector<std::string>& skip) {
  const auto skipped = [&](const std::string& what) {
    return std::find(skip.begin(), skip.end(), what) != skip.end();
  };
  std::map<std::string, at::Tensor> entries(state.begin(), state.end());
  const auto take = [&](const std::string& key, const at::Tensor& like) -> at::Tensor {
    auto it = entries.find(key);
    if (it == entries.end()) return {};
    at::Tensor t = it->second;
    entries.erase(it);
    return restored_like(t, like, "local SGD state " + key);
  };
  if (auto it = entries.find("local_steps"); it != entries.end()) {
    if (!skipped("local_steps")) local_steps_ = it->second.item<int64_t>();
    entries.erase(it);
  }
  std::vector<at::Tensor> anchor, momentum;
  for (const auto& [name, p] : params_) {
    at::Tensor a = take("anchor." + name, p.detach());
    at::Tensor m = take("momentum." + name, p.detach());
    if (a.defined()) anchor.push_back(a);
    if (m.defined()) momentum.push_back(m);
  }
  if (!entries.empty()) {
    HPCTRAIN_THROW(rt::Error, "local SGD state has " + std::to_string(entries.size()) +
                                  " entries for no trainable parameter, e.g. " +
                                  entries.begin()->first +
                                  " (another model, outer_optimizer or model.freeze)");
  }
  const std::pair<const std::vector<at::Tensor>*, const char*> parts[] = {{&anchor, "anchor"},
                                                                          {&momentum, "momentum"}};
  for (const auto& [got, what] : parts) {
    if (!got->empty() && got->size() != params_.size()) {
      HPCTRAIN_THROW(rt::Error, std::string("local SGD state holds the ") + what + " of " +
                                    std::to_string(got->size()) + " of the " +
                                    std::to_string(params_.size()) + " trainable parameters");
    }
  }
  if (!skipped("anchor")) anchor_ = std::move(anchor);
  if (!skipped("momentum")) momentum_ = std::move(momentum);
}

NamedTensors average_state(const std::vector<NamedTensors>& states) {
  if (states.empty()) HPCTRAIN_THROW(rt::Error, "average_state: no state to average");
  torch::NoGradGuard no_grad;
  NamedTensors out;
  const NamedTensors& first = states.front();
  for (size_t i = 0; i < first.size(); ++i) {
    const auto& [name, t0] = first[i];
    for (size_t s = 1; s < states.size(); ++s) {
      if (states[s].size() != first.size() || states[s][i].first != name ||
          states[s][i].second.sizes() != t0.sizes()) {
        HPCTRAIN_THROW(rt::Error, "average_state: the states differ at entry " + name);
      }
    }
    if (!at::isFloatingType(t0.scalar_type())) {
      out.emplace_back(name, t0.clone());
      continue;
    }
    at::Tensor sum = t0.clone();
    for (size_t s = 1; s < states.size(); ++s) sum.add_(states[s][i].second);
    out.emplace_back(name, sum.div_(static_cast<int64_t>(states.size())));
  }
  return out;
}

}  // namespace hpctrain::train
