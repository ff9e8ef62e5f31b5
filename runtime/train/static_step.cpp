#include "train/static_step.hpp"

#include <ATen/ATen.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "common/error.hpp"
#include "common/time.hpp"
#include "dist/progress.hpp"
#include "train/agreement.hpp"
#include "train/train_step.hpp"

namespace hpctrain::train {
namespace {

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

void StaticAddresses::record(Named addresses) {
  addresses_ = std::move(addresses);
  pointers_.clear();
  for (const auto& [name, p] : addresses_) pointers_.push_back(p);
  recorded_ = true;
}

void StaticAddresses::verify(const Named& addresses) const {
  const auto fail = [](const std::string& what) {
    HPCTRAIN_THROW(rt::Error, "the static step's " + what +
                                  ": a captured CUDA graph would use memory that is no longer "
                                  "the tensor's");
  };
  for (size_t i = 0; i < std::max(addresses.size(), addresses_.size()); ++i) {
    if (i >= addresses_.size()) fail(addresses[i].first + " appeared after warm-up");
    if (i >= addresses.size()) fail(addresses_[i].first + " went after warm-up");
    const auto& [name, was] = addresses_[i];
    const auto& [now_name, now] = addresses[i];
    if (name != now_name) fail("tensors changed after warm-up: " + name + " is now " + now_name);
    if (was != now) fail(name + " moved from " + hex(was) + " to " + hex(now));
  }
}

StaticStep::StaticStep(const TrainStepOptions& options, const at::Device& device,
                       model::Classifier& model, StepParts& parts, FusedStep& fused,
                       AgreementExchange& agreement, LossFn loss, bool capture, int warmup_steps)
    : options_(options),
      device_(device),
      parts_(parts),
      fused_(fused),
      agreement_(agreement),
      loss_fn_(std::move(loss)),
      graphs_(device,
              parts.scaler ? std::vector<std::string>{"forward-backward", "unscale", "update"}
                           : std::vector<std::string>{"forward-backward", "update"},
              capture, warmup_steps),
      warmup_steps_(warmup_steps) {
  for (const auto& b : model.named_buffers()) buffers_.emplace_back(b.key(), b.value());
  for (size_t i = 0; i < parts_.params.names.size(); ++i) {
    if (parts_.params.all[i].requires_grad()) trainable_.push_back(parts_.params.names[i]);
  }
  // The all-reduce runs between the segments (GradSync::all_reduce_now()), never from backward's
  // hooks: a graph's replay runs no hooks.
  parts_.grad_sync->set_enabled(false);
}

StaticStep::~StaticStep() = default;

void StaticStep::restored() {
  pin();
  graphs_.recapture();
}

void StaticStep::pin() {
  const auto& params = parts_.params.trainable;
  for (size_t i = 0; i < t_.grads.size(); ++i) {
    at::Tensor& g = params[i].mutable_grad();
    if (!g.is_same(t_.grads[i]))
      g = t_.grads[i];  // set to none or replaced (the divergence replay)
  }
  if (t_.state.empty()) return;
  auto& optimizer = *parts_.optimizer;
  const bool adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<at::Tensor>& pinned = t_.state[i];
    if (pinned.empty()) continue;
    void* key = params[i].unsafeGetTensorImpl();
    auto it = optimizer.state().find(key);
    if (it == optimizer.state().end()) {
      // None restored for it: a fresh state, zeros, as the fused step would make.
      for (auto& t : pinned) t.zero_();
      if (adamw) {
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(0);
        s->exp_avg(pinned[0]);
        s->exp_avg_sq(pinned[1]);
        optimizer.state()[key] = std::move(s);
      } else {
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(pinned[0]);
        optimizer.state()[key] = std::move(s);
      }
      continue;
    }
    const auto keep = [](at::Tensor& static_t, const at::Tensor& now) {
      if (now.is_same(static_t)) return false;
      static_t.copy_(now);
      return true;
    };
    if (adamw) {
      auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
      if (keep(pinned[0], s.exp_avg())) s.exp_avg(pinned[0]);
      if (keep(pinned[1], s.exp_avg_sq())) s.exp_avg_sq(pinned[1]);
    } else {
      auto& s = static_cast<torch::optim::SGDParamState&>(*it->second);
      if (keep(pinned[0], s.momentum_buffer())) s.momentum_buffer(pinned[0]);
    }
  }
}

template <typename F>
void StaticStep::each_static(F&& f) const {
  const auto add = [&](const at::Tensor& t, const auto& name) {
    if (t.defined()) f(t, name);
  };
  const auto& names = parts_.params.names;
  for (size_t i = 0; i < names.size(); ++i) add(parts_.params.all[i], [&] { return names[i]; });
  for (const auto& [name, b] : buffers_) add(b, [&] { return name; });
  // The trainable parameters' gradients and optimizer state, named after the parameter.
  for (size_t i = 0; i < t_.grads.size(); ++i) {
    add(t_.grads[i], [&] { return trainable_[i] + ".grad"; });
  }
  const auto& params = parts_.params.trainable;
  auto& optimizer = *parts_.optimizer;
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = optimizer.state().find(params[i].unsafeGetTensorImpl());
    if (it == optimizer.state().end()) continue;
    if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
      add(s->exp_avg(), [&] { return trainable_[i] + ".exp_avg"; });
      add(s->exp_avg_sq(), [&] { return trainable_[i] + ".exp_avg_sq"; });
    } else if (const auto* m = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
      add(m->momentum_buffer(), [&] { return trainable_[i] + ".momentum_buffer"; });
    }
  }
  const std::vector<at::Tensor> steps = fused_.step_counts();
  for (size_t i = 0; i < steps.size(); ++i) {
    add(steps[i], [&] { return "adamw step count " + std::to_string(i); });
  }
  if (parts_.scaler) {
    const auto [scale, tracker] = parts_.scaler->tensors();
    add(scale, [] { return std::string("loss scale"); });
    add(tracker, [] { return std::string("loss scale growth tracker"); });
  }
  const std::pair<const char*, const at::Tensor*> own[] = {
      {"input images", &t_.raw}, {"input labels", &t_.labels}, {"poison", &t_.poison},
      {"learning rate", &t_.lr}, {"agreement", &t_.agreement}, {"loss", &t_.loss}};
  for (const auto& [name, t] : own) add(*t, [name = name] { return std::string(name); });
}

StaticAddresses::Named StaticStep::addresses() const {
  StaticAddresses::Named out;
  each_static(
      [&](const at::Tensor& t, const auto& name) { out.emplace_back(name(), t.data_ptr()); });
  return out;
}

std::vector<const void*> StaticStep::pointers() const {
  std::vector<const void*> out;
  each_static([&](const at::Tensor& t, const auto&) { out.push_back(t.data_ptr()); });
  return out;
}

std::optional<StepTaken> StaticStep::run(TrainInput& input, int64_t step,
                                         const Contribute& contribute) {
  const auto step_start = Clock::now();
  progress::enter(progress::Phase::kDataWait);
  graphs_.begin_step();
  std::optional<DeviceBatch> batch = input.next(step);
  if (!batch) {
    graphs_.end_step();
    return std::nullopt;
  }
  if (!batch->raw.defined()) {
    HPCTRAIN_THROW(rt::Error, "the static step needs the input's raw batches (set_raw)");
  }
  if (!t_.raw.defined()) {
    t_.raw = at::empty_like(batch->raw, at::MemoryFormat::Contiguous);
    t_.labels = at::empty_like(batch->labels, at::MemoryFormat::Contiguous);
  }
  // A batch of another shape (training drops a rank's short final batch, so only ever another
  // run's) runs eagerly on its own tensors.
  const bool static_shapes =
      t_.raw.sizes() == batch->raw.sizes() && t_.labels.sizes() == batch->labels.sizes();
  graphs_.set_static_shapes(static_shapes);
  StepTaken taken;
  taken.lr = parts_.schedule->lr_at(step);
  const auto [raw, labels] = stage(*batch, taken.lr, static_shapes);
  // Local SGD: after its warm-up the gradients stay on each rank (no all-reduce).
  LocalSgd* local_sgd = parts_.local_sgd.get();
  const bool local = local_sgd && local_sgd->local(step);
  if (local) local_sgd->start_local_step();
  pin();
  if (record_.recorded()) {
    // Names only when something moved: verify() says what.
    if (!record_.unchanged(pointers())) record_.verify(addresses());
    ++checked_steps_;
  }
  progress::enter(progress::Phase::kForward);
  graphs_.run(0, [&](bool) { forward_backward(input, raw, labels); });
  if (t_.grads.empty()) adopt_grads();
  taken.busy_s = seconds_since(step_start);
  if (!local) parts_.grad_sync->all_reduce_now();
  progress::enter(progress::Phase::kAgreement);
  agree_and_update(contribute, step);
  if (local_sgd && local_sgd->due()) {
    progress::enter(progress::Phase::kAverage);
    local_sgd->synchronize();
  }
  taken.loss = t_.loss.clone();  // t_.loss is the next step's
  graphs_.end_step();
  // From the step after warm-up (the capture's, on a GPU) on, nothing static may move.
  if (!record_.recorded() && ++steps_ > warmup_steps_ && static_shapes) {
    record_.record(addresses());
  }
  taken.agreed = agreement_.previous();
  return taken;
}

std::pair<at::Tensor, at::Tensor> StaticStep::stage(const DeviceBatch& batch, double lr,
                                                    bool static_shapes) {
  set_lr(*parts_.optimizer, lr);  // what a checkpoint records
  if (!t_.lr.defined()) {
    // The CUDA kernels read a float32 learning rate; the CPU's read theirs as a double.
    t_.lr = at::empty(
        {},
        at::TensorOptions().dtype(device_.is_cuda() ? at::kFloat : at::kDouble).device(device_));
  }
  t_.lr.fill_(lr);
  if (!options_.poison_samples.empty()) {
    if (!t_.poison.defined()) t_.poison = at::ones({1}, at::TensorOptions().device(device_));
    t_.poison.fill_(
        poisoned(batch, options_.poison_samples) ? std::numeric_limits<double>::quiet_NaN() : 1.0);
  }
  if (!static_shapes) return {batch.raw, batch.labels};
  t_.raw.copy_(batch.raw, /*non_blocking=*/true);
  t_.labels.copy_(batch.labels, /*non_blocking=*/true);
  return {t_.raw, t_.labels};
}

void StaticStep::adopt_grads() {
  for (const auto& p : parts_.params.trainable) {
    if (!p.grad().defined()) {
      HPCTRAIN_THROW(rt::Error,
                     "a parameter that requires grad got no gradient in the first step; every "
                     "one must take part in the loss (or set requires_grad=false)");
    }
    t_.grads.push_back(p.grad());
  }
}

void StaticStep::agree_and_update(const Contribute& contribute, int64_t step) {
  float slots[Agreement::kSize] = {};
  contribute(slots);
  const at::Tensor staged = agreement_.stage(slots);
  if (!t_.agreement.defined()) t_.agreement = at::empty_like(staged);
  t_.agreement.copy_(staged);
  size_t segment = 1;
  if (parts_.scaler) graphs_.run(segment++, [&](bool) { unscale(); });
  agreement_.reduce(t_.agreement);
  graphs_.run(segment, [&](bool) { update(); });
  if (t_.state.empty()) adopt_state();
  agreement_.send_home(t_.agreement, step);
}

void StaticStep::adopt_state() {
  auto& optimizer = *parts_.optimizer;
  for (const auto& p : parts_.params.trainable) {
    std::vector<at::Tensor> tensors;
    auto it = optimizer.state().find(p.unsafeGetTensorImpl());
    if (it != optimizer.state().end()) {
      if (const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
        tensors = {s->exp_avg(), s->exp_avg_sq()};
      } else if (const auto* m =
                     dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
        tensors = {m->momentum_buffer()};
      }
    }
    t_.state.push_back(std::move(tensors));
  }
}

void StaticStep::forward_backward(TrainInput& input, const at::Tensor& raw,
                                  const at::Tensor& labels) {
  if (!t_.grads.empty()) {
    at::NoGradGuard no_grad;
    at::_foreach_zero_(t_.grads);
  }
  const at::Tensor images = input.normalise(raw);
  at::Tensor loss = loss_fn_(images, labels, t_.poison);
  if (options_.plant_host_read) (void)loss.item<float>();  // a test's planted fault
  if (!t_.loss.defined()) t_.loss = at::empty_like(loss.detach());
  t_.loss.copy_(loss.detach());
  (parts_.scaler ? parts_.scaler->scale(loss) : loss).backward();
}

void StaticStep::unscale() {
  t_.agreement.narrow(0, Agreement::kFoundInf, 1)
      .copy_(parts_.scaler->unscale(parts_.params.trainable));
}

void StaticStep::update() {
  at::Tensor found_inf;
  if (parts_.scaler) {
    found_inf = t_.agreement.narrow(0, Agreement::kFoundInf, 1).clamp_max(1);
    parts_.scaler->update(found_inf);
  }
  if (options_.grad_clip_norm) {
    clip_grad_norm_on_device(parts_.params.trainable, *options_.grad_clip_norm);
  }
  fused_.step(found_inf, t_.lr);
}

}  // namespace hpctrain::train
