// The trainer's parts built from the spec, each through its adapter (the components themselves
// never read the spec): the backends' settings, the data, the model with the same initial weights
// on every rank, local SGD, the step plan, the loss scaler and the sample trace.
// train/trainer.cpp's trainer_from_spec() calls them in an order that matters (it says which).
// Thread safety: call from the training thread; model_from_spec() and the data issue collectives
// or draw from torch's global generator.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.hpp"
#include "data/source.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"
#include "train/device_input.hpp"
#include "train/grad_scaler.hpp"
#include "train/hooks.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

// torch's intra-op threads (train.threads, else job.cpus_per_task; one inter-op thread: the loop
// issues ops from one thread), TF32 and cuDNN's autotuner on GPUs. Throws rt::Error for fp16 on
// a CPU unless `fp16_on_cpu` (tests).
void configure_backends_from_spec(const spec::Spec& spec, const at::Device& device,
                                  bool fp16_on_cpu);

// [data] train (or synthetic images) and val, each with its loader for this rank, set up for
// `path`. A sample skipped by [data] skip_corrupt is named in the rank's log.
struct TrainData {
  std::shared_ptr<const data::ImageSource> train_source;
  std::unique_ptr<data::Loader> train;
  std::shared_ptr<const data::ImageSource> val_source;  // null without [data] val
  std::unique_ptr<data::Loader> val;                    // null without [data] val
};
// Throws rt::DatasetFormatError when the training data has more classes than the model.
TrainData data_from_spec(const spec::Spec& spec, int rank, int world, const InputPath& path);

// The model on `device` with the same initial weights everywhere: the same seed, and rank 0's
// broadcast for certainty. Collective.
std::shared_ptr<model::Classifier> model_from_spec(const spec::Spec& spec, int64_t channels,
                                                   const at::Device& device,
                                                   dist::Communicator& comm);

// train.sync = "local_sgd": local SGD over the trainable parameters and the buffers; null
// otherwise.
std::unique_ptr<LocalSgd> local_sgd_from_spec(const spec::Spec& spec, model::Classifier& model,
                                              const NamedParams& named, dist::Communicator& comm);

// How many steps, of how many images.
struct StepPlan {
  int64_t steps_per_epoch = 0;
  int64_t global_batch = 0;  // all ranks' images in a step
  int64_t total_steps = 0;   // the epochs' steps, or train.max_steps when fewer
};
// `steps_per_epoch`: the training loader's batches in an epoch. Throws rt::DataError when an
// epoch holds no full batch.
StepPlan step_plan_from_spec(const spec::Spec& spec, const data::DatasetInfo& info,
                             int64_t steps_per_epoch, int world);

// train.precision = "fp16": the loss scaler (tests may set its start and growth interval); null
// otherwise.
std::unique_ptr<GradScaler> scaler_from_spec(const spec::Spec& spec, const TrainHooks& hooks,
                                             const at::Device& device);

// TrainHooks::trace_samples: this rank's trace file (TRACE[.TAG].rank-R), appended to; null when
// off.
std::unique_ptr<std::ofstream> open_trace(const TrainHooks& hooks, const std::string& srun_step_tag,
                                          int rank);

}  // namespace hpctrain::train
