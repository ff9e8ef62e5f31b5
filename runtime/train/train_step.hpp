// One training step of one rank, from its batch to the updated weights: the learning rate of the
// step, forward under autocast and the loss, backward (scaled in fp16) with the gradients
// all-reduced as they are ready (GradSync, or kept on the rank for local SGD's local steps), the
// per-step agreement of the ranks (train/agreement.hpp), and the optimizer's step (skipped on an
// fp16 overflow any rank saw), then local SGD's averaging when due.
//
// With train.cuda_graphs the device path's step is the static step (train/static_step.hpp):
// its tensors held at fixed addresses, captured as CUDA graphs on a GPU, its eager twin on the
// CPU.
//
// Two paths (train/device_input.hpp): on the host path the agreement is read at once and the
// step taken on the host's verdict; on the device path nothing in the step waits for the device:
// the fp16 verdict stays on the device, the fused optimizer skips on it there, and the agreement
// comes back a step late. The parts the step owns (parameters, gradient sync, local SGD,
// optimizer, schedule, loss scaler) are also what a checkpoint saves (state()).
// Thread safety: the training thread only; run() is collective.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/grad_sync.hpp"
#include "model/model.hpp"
#include "spec/choices.hpp"
#include "train/agreement.hpp"
#include "train/agreement_exchange.hpp"
#include "train/checkpoint_content.hpp"
#include "train/fused_step.hpp"
#include "train/grad_scaler.hpp"
#include "train/hooks.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"
#include "train/schedule.hpp"
#include "train/static_step.hpp"
#include "train/train_input.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct TrainStepOptions {
  spec::Precision precision = spec::Precision::kFp32;
  double label_smoothing = 0;
  std::optional<double> grad_clip_norm;
  int cuda_sync_debug = 0;  // TrainHooks::cuda_sync_debug (honoured on CUDA devices only)
  std::vector<int64_t> poison_samples;  // TrainHooks::poison_samples
  bool faulty = false;                  // TrainHooks::faulty_rank is this rank
  bool cuda_graphs = false;        // train.cuda_graphs: the static step (train/static_step.hpp)
  bool plant_host_read = false;    // TrainHooks::host_read_in_step
  bool static_step_eager = false;  // TrainHooks::static_step_eager
};
TrainStepOptions train_step_options_from_spec(const spec::Spec& spec, const TrainHooks& hooks,
                                              int rank);

// The model's parameters in named_parameters() order.
struct ModelParams {
  NamedParams named;
  std::vector<std::string> names;
  std::vector<at::Tensor> all;
  std::vector<at::Tensor> trainable;  // those that require a gradient
};
ModelParams model_params(model::Classifier& model);

// Whether `batch` holds one of the samples TrainHooks::poison_samples names (its loss is NaN).
bool poisoned(const DeviceBatch& batch, const std::vector<int64_t>& poison_samples);

// What the step owns, built from the spec (train/builders.hpp).
struct StepParts {
  ModelParams params;
  std::unique_ptr<dist::GradSync> grad_sync;
  std::unique_ptr<LocalSgd> local_sgd;  // train.sync = "local_sgd"; null otherwise
  std::unique_ptr<LrSchedule> schedule;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<GradScaler> scaler;  // fp16; null otherwise
};

// A step taken: its loss (a device tensor, not read), learning rate, this rank's busy time (from
// asking for the batch to the end of backward) and the agreement it may act on (on the device
// path the step before's; none on the first).
struct StepTaken {
  at::Tensor loss;
  double lr = 0;
  double busy_s = 0;
  Agreed agreed;
};

class TrainStep {
 public:
  // Fills this rank's slots of the step's agreement (the stop signal, the checkpointer's).
  using Contribute = std::function<void(float* slots)>;

  TrainStep(const TrainStepOptions& options, std::shared_ptr<model::Classifier> model,
            StepParts parts, const data::DatasetInfo& dataset, bool device_path,
            dist::Communicator& comm);
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // Collective: the step after `step` completed steps, on `input`'s next batch; nullopt at the
  // end of the epoch (nothing was done).
  std::optional<StepTaken> run(TrainInput& input, int64_t step, const Contribute& contribute);

  // What a checkpoint saves and restores.
  TrainingState& state() { return *state_; }
  // After a restore (and before the first step): the device path's fused optimizer takes the
  // restored state.
  void restored();
  // Before a save: the device path's optimizer state where the checkpoint reads it.
  void flush();
  // Local SGD: averages the ranks' models when they took local steps since the last averaging
  // (before an evaluation and at the end), so that they hold one model.
  void average_diverged();

  // The replay on divergence (train/replay_check.hpp): the loss of `batch` and the sum and
  // absolute sum of this rank's own gradients from it, in double, computed from the model as it
  // is with no all-reduce and no optimizer step (the gradients are cleared after). The model's
  // batch-norm running statistics move, as in any training forward.
  std::array<double, 3> witness(const DeviceBatch& batch);

  model::Classifier& model() { return *model_; }
  const LocalSgd* local_sgd() const { return parts_.local_sgd.get(); }
  double loss_scale() const { return parts_.scaler ? parts_.scaler->current_scale() : 1.0; }
  // train.cuda_graphs: the static step, once restored() made it; null otherwise.
  const StaticStep* static_step() const { return static_.get(); }

 private:
  at::Tensor forward_backward(const DeviceBatch& batch, int64_t step);
  at::Tensor forward_loss(const DeviceBatch& batch);
  // The loss of normalised `images`, with the faulty rank's plant.
  at::Tensor loss_of(const at::Tensor& images, const at::Tensor& labels);
  Agreed agree_on_host(const Contribute& contribute, int64_t step);
  void agree_on_device(const Contribute& contribute, int64_t step);

  TrainStepOptions options_;
  dist::Communicator& comm_;
  std::shared_ptr<model::Classifier> model_;
  StepParts parts_;
  bool device_path_;
  std::unique_ptr<TrainingState> state_;
  std::unique_ptr<FusedStep> fused_;  // the device path's, after restored()
  AgreementExchange agreement_;
  std::unique_ptr<StaticStep> static_;  // train.cuda_graphs, after restored()
};

}  // namespace hpctrain::train
