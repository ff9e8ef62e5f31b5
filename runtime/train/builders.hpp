// The parts of a trainer, each built from the spec (and the worker's TrainOptions) on its own:
// the backends' settings, the data, the model with the same initial weights on every rank, its
// parameters, local SGD, the step plan, the loss scaler, the checkpointer and the sample trace.
// Trainer::setup() calls them in an order that matters (train/trainer.cpp says which).
// Thread safety: call from the training thread; initial_model() and the data issue collectives
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
#include "train/checkpointing.hpp"
#include "train/device_input.hpp"
#include "train/grad_scaler.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"
#include "train/trainer.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

// torch's intra-op threads (train.threads, else job.cpus_per_task; one inter-op thread: the loop
// issues ops from one thread), TF32 and cuDNN's autotuner on GPUs. Throws rt::Error for fp16 on
// a CPU unless `fp16_on_cpu` (tests).
void configure_backends(const spec::Spec& spec, const at::Device& device, bool fp16_on_cpu);

// [data] train (or synthetic images) and val, each with its loader for this rank, set up for
// `path`. A sample skipped by [data] skip_corrupt is named in the rank's log.
struct TrainData {
  std::shared_ptr<const data::ImageSource> train_source;
  std::unique_ptr<data::Loader> train;
  std::shared_ptr<const data::ImageSource> val_source;  // null without [data] val
  std::unique_ptr<data::Loader> val;                    // null without [data] val
};
// Throws rt::DatasetFormatError when the training data has more classes than the model.
TrainData build_data(const spec::Spec& spec, int rank, int world, const InputPath& path);

// The model on `device` with the same initial weights everywhere: the same seed, and rank 0's
// broadcast for certainty. Collective.
std::shared_ptr<model::Classifier> initial_model(const spec::Spec& spec, int64_t channels,
                                                 const at::Device& device,
                                                 dist::Communicator& comm);

// The model's parameters in named_parameters() order.
struct ModelParams {
  NamedParams named;
  std::vector<std::string> names;
  std::vector<at::Tensor> all;
  std::vector<at::Tensor> trainable;  // those that require a gradient
};
ModelParams model_params(model::Classifier& model);

// train.sync = "local_sgd": local SGD over the trainable parameters and the buffers; null
// otherwise.
std::unique_ptr<LocalSgd> build_local_sgd(const spec::Spec& spec, model::Classifier& model,
                                          const NamedParams& named, dist::Communicator& comm);

// How many steps, of how many images.
struct StepPlan {
  int64_t steps_per_epoch = 0;
  int64_t global_batch = 0;  // all ranks' images in a step
  int64_t total_steps = 0;   // the epochs' steps, or train.max_steps when fewer
};
// `steps_per_epoch`: the training loader's batches in an epoch. Throws rt::DataError when an
// epoch holds no full batch.
StepPlan plan_steps(const spec::Spec& spec, const data::DatasetInfo& info, int64_t steps_per_epoch,
                    int world);

// train.precision = "fp16": the loss scaler (tests may set its start and growth interval); null
// otherwise.
std::unique_ptr<GradScaler> build_scaler(const spec::Spec& spec, const TrainOptions& options,
                                         const at::Device& device);

// The checkpointer of options.run_dir, with the tests' restore ablation when asked.
std::unique_ptr<Checkpointer> build_checkpointer(const spec::Spec& spec,
                                                 const TrainOptions& options,
                                                 dist::Communicator& comm);

// options.trace_samples: this rank's trace file (TRACE[.TAG].rank-R), appended to; null when off.
std::unique_ptr<std::ofstream> open_trace(const TrainOptions& options, int rank);

}  // namespace hpctrain::train
