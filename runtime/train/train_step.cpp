#include "train/train_step.hpp"

#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>

#include "common/error.hpp"
#include "common/time.hpp"
#include "dist/progress.hpp"
#include "spec/spec.hpp"
#include "train/guards.hpp"

namespace hpctrain::train {

TrainStepOptions train_step_options_from_spec(const spec::Spec& spec, const TrainHooks& hooks,
                                              int rank) {
  TrainStepOptions o;
  o.precision = spec.train.precision;
  o.label_smoothing = spec.train.label_smoothing;
  o.grad_clip_norm = spec.train.grad_clip_norm;
  o.cuda_sync_debug = hooks.cuda_sync_debug;
  o.poison_samples = hooks.poison_samples;
  o.faulty = hooks.faulty_rank == rank;
  o.cuda_graphs = spec.train.cuda_graphs;
  o.plant_host_read = hooks.host_read_in_step;
  o.static_step_eager = hooks.static_step_eager;
  return o;
}

bool poisoned(const DeviceBatch& batch, const std::vector<int64_t>& poison_samples) {
  return std::find_first_of(batch.samples.begin(), batch.samples.end(), poison_samples.begin(),
                            poison_samples.end()) != batch.samples.end();
}

ModelParams model_params(model::Classifier& model) {
  ModelParams out;
  for (auto& p : model.named_parameters()) {
    out.named.emplace_back(p.key(), p.value());
    out.names.push_back(p.key());
    out.all.push_back(p.value());
    if (p.value().requires_grad()) out.trainable.push_back(p.value());
  }
  return out;
}

TrainStep::TrainStep(const TrainStepOptions& options, std::shared_ptr<model::Classifier> model,
                     StepParts parts, const data::DatasetInfo& dataset, bool device_path,
                     dist::Communicator& comm)
    : options_(options),
      comm_(comm),
      model_(std::move(model)),
      parts_(std::move(parts)),
      device_path_(device_path),
      agreement_(comm, comm.device()) {
  if (!comm.device().is_cuda()) options_.cuda_sync_debug = 0;
  if (options_.cuda_graphs && !device_path_) {
    HPCTRAIN_THROW(rt::Error,
                   "train.cuda_graphs needs the device path: a GPU job (on the CPU, "
                   "HPCTRAIN_GPU_PATH_ON_CPU=1 runs the static step's eager twin)");
  }
  state_ = std::make_unique<TrainingState>(TrainingState{*model_, *parts_.optimizer,
                                                         parts_.params.named, parts_.scaler.get(),
                                                         dataset, parts_.local_sgd.get()});
}

TrainStep::~TrainStep() = default;

void TrainStep::restored() {
  if (!device_path_) return;
  if (fused_) {
    fused_->reload_state();
  } else {
    fused_ = std::make_unique<FusedStep>(*parts_.optimizer, parts_.params.named);
  }
  if (!options_.cuda_graphs) return;
  if (static_) {
    static_->restored();
    return;
  }
  auto loss = [this](const at::Tensor& images, const at::Tensor& labels, const at::Tensor& poison) {
    at::Tensor l = loss_of(images, labels);
    return poison.defined() ? l * poison : l;
  };
  static_ = std::make_unique<StaticStep>(options_, comm_.device(), *model_, parts_, *fused_,
                                         agreement_, std::move(loss),
                                         /*capture=*/!options_.static_step_eager);
}

void TrainStep::flush() {
  if (fused_) fused_->flush_state();
}

void TrainStep::average_diverged() {
  if (parts_.local_sgd && parts_.local_sgd->diverged()) parts_.local_sgd->synchronize();
}

std::optional<StepTaken> TrainStep::run(TrainInput& input, int64_t step,
                                        const Contribute& contribute) {
  // The step's work up to the agreement: on a GPU nothing in it waits for the device
  // (HPCTRAIN_CUDA_SYNC_DEBUG checks that).
  std::optional<SyncDebugScope> no_sync;
  if (options_.cuda_sync_debug) no_sync.emplace(options_.cuda_sync_debug);
  if (static_) {
    input.set_raw(true);
    return static_->run(input, step, contribute);
  }
  const auto step_start = Clock::now();
  progress::enter(progress::Phase::kDataWait);
  auto batch = input.next(step);
  if (!batch) return std::nullopt;
  StepTaken taken;
  taken.lr = parts_.schedule->lr_at(step);
  set_lr(*parts_.optimizer, taken.lr);
  taken.loss = forward_backward(*batch, step);
  // This rank's own work in the step, before it first waits for its peers (the straggler
  // report's measure; on GPUs the host's view: data waits and launches, not kernel time).
  taken.busy_s = seconds_since(step_start);
  parts_.grad_sync->finish();
  progress::enter(progress::Phase::kAgreement);
  // One small all-reduce per step settles everything the ranks must decide alike
  // (train/agreement.hpp).
  if (device_path_) {
    agree_on_device(contribute, step);
  } else {
    taken.agreed = agree_on_host(contribute, step);
  }
  LocalSgd* local_sgd = parts_.local_sgd.get();
  if (local_sgd && local_sgd->due()) {
    progress::enter(progress::Phase::kAverage);
    local_sgd->synchronize();
  }
  no_sync.reset();
  if (device_path_) taken.agreed = agreement_.previous();  // the step before's
  return taken;
}

// The step's gradients, on their way to the other ranks (GradSync); returns the loss.
at::Tensor TrainStep::forward_backward(const DeviceBatch& batch, int64_t step) {
  parts_.optimizer->zero_grad();
  // Local SGD: after its warm-up the gradients stay on each rank (no all-reduce).
  if (LocalSgd* local_sgd = parts_.local_sgd.get()) {
    const bool local = local_sgd->local(step);
    parts_.grad_sync->set_enabled(!local);
    if (local) local_sgd->start_local_step();
  }
  parts_.grad_sync->prepare();
  progress::enter(progress::Phase::kForward);
  at::Tensor loss = forward_loss(batch);
  progress::enter(progress::Phase::kBackward);
  (parts_.scaler ? parts_.scaler->scale(loss) : loss).backward();
  return loss;
}

// The batch's loss under autocast, with the tests' plants (a corrupt sample, a faulty rank).
at::Tensor TrainStep::forward_loss(const DeviceBatch& batch) {
  at::Tensor loss = loss_of(batch.images, batch.labels);
  if (poisoned(batch, options_.poison_samples)) {
    loss = loss * std::numeric_limits<double>::quiet_NaN();  // a test's corrupt sample
  }
  return loss;
}

at::Tensor TrainStep::loss_of(const at::Tensor& images, const at::Tensor& labels) {
  AutocastGuard autocast(comm_.device().type(), options_.precision);
  const auto ce =
      torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(options_.label_smoothing);
  at::Tensor logits = model_->forward(images);
  if (options_.faulty) logits = logits + 1e-3;  // a test's silent data corruption
  return torch::nn::functional::cross_entropy(logits, labels, ce);
}

std::array<double, 3> TrainStep::witness(const DeviceBatch& batch) {
  const bool synced = parts_.grad_sync->enabled();
  parts_.optimizer->zero_grad();
  parts_.grad_sync->set_enabled(false);
  parts_.grad_sync->prepare();
  const at::Tensor loss = forward_loss(batch);
  loss.backward();
  double sum = 0, abs_sum = 0;
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : parts_.params.trainable) {
      if (!p.grad().defined()) continue;
      const at::Tensor g = p.grad().to(at::kDouble);
      sum += g.sum().item<double>();
      abs_sum += g.abs().sum().item<double>();
    }
  }
  const std::array<double, 3> digest = {loss.item<double>(), sum, abs_sum};
  parts_.optimizer->zero_grad();
  parts_.grad_sync->set_enabled(synced);
  return digest;
}

// The host path: the agreement is all-reduced and read at once, and the step taken (or, fp16,
// skipped) on the host's verdict.
Agreed TrainStep::agree_on_host(const Contribute& contribute, int64_t step) {
  float slots[Agreement::kSize] = {};
  GradScaler* scaler = parts_.scaler.get();
  at::Tensor found_inf;
  if (scaler) {
    found_inf = scaler->unscale(parts_.params.trainable);
    slots[Agreement::kFoundInf] = found_inf.item<float>();
  }
  contribute(slots);
  const Agreed agreed = agreement_.reduce_now(slots, step);
  const bool skip = agreed.slots[Agreement::kFoundInf] > 0;
  if (scaler) scaler->update(found_inf.fill_(skip ? 1.0f : 0.0f));
  if (!skip) {
    if (options_.grad_clip_norm) {
      torch::nn::utils::clip_grad_norm_(parts_.params.trainable, *options_.grad_clip_norm);
    }
    parts_.optimizer->step();
  }
  return agreed;
}

// The device path: nothing waits for the device. The fp16 verdict goes into the agreement on
// the device and the fused optimizer skips on it there; the agreed values come back to the host
// asynchronously and are acted on one step late (AgreementExchange::previous()).
void TrainStep::agree_on_device(const Contribute& contribute, int64_t step) {
  float slots[Agreement::kSize] = {};
  contribute(slots);
  at::Tensor agreement = agreement_.stage(slots);
  GradScaler* scaler = parts_.scaler.get();
  at::Tensor found_inf;
  if (scaler) {
    agreement.narrow(0, Agreement::kFoundInf, 1).copy_(scaler->unscale(parts_.params.trainable));
  }
  agreement_.reduce(agreement);
  if (scaler) {
    found_inf = agreement.narrow(0, Agreement::kFoundInf, 1).clamp_max(1);
    scaler->update(found_inf);
  }
  if (options_.grad_clip_norm) {
    clip_grad_norm_on_device(parts_.params.trainable, *options_.grad_clip_norm);
  }
  fused_->step(found_inf);
  agreement_.send_home(agreement, step);
}

}  // namespace hpctrain::train
