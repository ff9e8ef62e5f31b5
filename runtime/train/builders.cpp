#include "train/builders.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <iostream>

#include "common/error.hpp"
#include "dist/grad_sync.hpp"
#include "spec/spec.hpp"

namespace hpctrain::train {
namespace {

// The source of [data] train or val: files, or synthetic images for train.
std::shared_ptr<const data::ImageSource> source_from_spec(const spec::Spec& spec, bool train) {
  if (train && spec.data.synthetic) {
    const int64_t classes = spec.model.num_classes;
    return data::ImageSource::synthetic(spec.data.synthetic_samples, spec.data.synthetic_image_size,
                                        /*channels=*/3, classes,
                                        static_cast<uint64_t>(spec.train.seed));
  }
  return data::ImageSource::open(train ? spec.data.train : spec.data.val,
                                 data::source_options_from_spec(spec));
}

}  // namespace

void configure_backends_from_spec(const spec::Spec& spec, const at::Device& device,
                                  bool fp16_on_cpu) {
  // Threads before any parallel work.
  const int64_t threads = spec.train.threads.value_or(spec.job.cpus_per_task);
  at::set_num_threads(static_cast<int>(std::max<int64_t>(1, threads)));
  if (device.is_cuda()) {
    at::globalContext().setAllowTF32CuBLAS(spec.train.tf32);
    at::globalContext().setAllowTF32CuDNN(spec.train.tf32);
    at::globalContext().setBenchmarkCuDNN(true);
  }
  if (spec.train.precision == spec::Precision::kFp16 && !device.is_cuda() && !fp16_on_cpu) {
    HPCTRAIN_THROW(rt::Error, "train.precision = \"fp16\" needs a GPU; use \"bf16\" on CPUs");
  }
}

TrainData data_from_spec(const spec::Spec& spec, int rank, int world, const InputPath& path) {
  TrainData out;
  out.train_source = source_from_spec(spec, /*train=*/true);
  const data::DatasetInfo& info = out.train_source->info();
  if (info.num_classes > spec.model.num_classes) {
    HPCTRAIN_THROW(rt::DatasetFormatError, "the training data has " +
                                               std::to_string(info.num_classes) +
                                               " classes but model.num_classes is " +
                                               std::to_string(spec.model.num_classes));
  }
  auto log_corrupt = [](const std::string& what) {
    std::cerr << rt::rank_prefix() << "warning: skipped a sample that does not decode: " << what
              << "\n";
  };
  auto train_config = data::loader_config_from_spec(spec, /*train=*/true, rank, world);
  train_config.on_corrupt = log_corrupt;
  configure_loader(train_config, path);
  out.train = std::make_unique<data::Loader>(out.train_source, std::move(train_config));
  if (!spec.data.val.empty()) {
    out.val_source = source_from_spec(spec, /*train=*/false);
    auto config = data::loader_config_from_spec(spec, /*train=*/false, rank, world);
    config.transform.mean = info.mean;  // normalised as the model saw its training data
    config.transform.std = info.std;
    config.on_corrupt = log_corrupt;
    configure_loader(config, path);
    out.val = std::make_unique<data::Loader>(out.val_source, config);
  }
  return out;
}

std::shared_ptr<model::Classifier> model_from_spec(const spec::Spec& spec, int64_t channels,
                                                   const at::Device& device,
                                                   dist::Communicator& comm) {
  torch::manual_seed(static_cast<uint64_t>(spec.train.seed));
  auto model = model::build_model(model::model_config_from_spec(spec, channels));
  model->to(device);
  if (spec.train.channels_last) model::to_channels_last(*model);
  std::vector<at::Tensor> all;
  for (auto& p : model->parameters()) all.push_back(p);
  for (auto& b : model->buffers()) all.push_back(b);
  dist::broadcast_from_rank0(comm, all);
  return model;
}

std::unique_ptr<LocalSgd> local_sgd_from_spec(const spec::Spec& spec, model::Classifier& model,
                                              const NamedParams& named, dist::Communicator& comm) {
  if (spec.train.sync != spec::Sync::kLocalSgd) return nullptr;
  NamedParams trainable, buffers;
  for (const auto& [name, p] : named) {
    if (p.requires_grad()) trainable.emplace_back(name, p);
  }
  for (auto& b : model.named_buffers()) buffers.emplace_back(b.key(), b.value());
  return std::make_unique<LocalSgd>(trainable, buffers, comm, local_sgd_options_from_spec(spec));
}

StepPlan step_plan_from_spec(const spec::Spec& spec, const data::DatasetInfo& info,
                             int64_t steps_per_epoch, int world) {
  if (steps_per_epoch < 1) {
    HPCTRAIN_THROW(rt::DataError, "an epoch of " + std::to_string(info.num_samples) +
                                      " training samples holds no full batch of " +
                                      std::to_string(spec.train.batch_size) + " per rank on " +
                                      std::to_string(world) + " ranks");
  }
  StepPlan plan;
  plan.steps_per_epoch = steps_per_epoch;
  plan.global_batch = spec.train.batch_size * world;
  plan.total_steps = spec.train.epochs * steps_per_epoch;
  if (spec.train.max_steps) plan.total_steps = std::min(plan.total_steps, *spec.train.max_steps);
  return plan;
}

std::unique_ptr<GradScaler> scaler_from_spec(const spec::Spec& spec, const TrainHooks& hooks,
                                             const at::Device& device) {
  if (spec.train.precision != spec::Precision::kFp16) return nullptr;
  GradScalerConfig scaling;
  if (hooks.fp16_init_scale) scaling.init_scale = *hooks.fp16_init_scale;
  if (hooks.fp16_growth_interval) scaling.growth_interval = *hooks.fp16_growth_interval;
  return std::make_unique<GradScaler>(scaling, device);
}

std::unique_ptr<std::ofstream> open_trace(const TrainHooks& hooks, const std::string& srun_step_tag,
                                          int rank) {
  if (hooks.trace_samples.empty()) return nullptr;
  return std::make_unique<std::ofstream>(hooks.trace_samples.string() +
                                             (srun_step_tag.empty() ? "" : "." + srun_step_tag) +
                                             ".rank-" + std::to_string(rank),
                                         std::ios::app);
}

}  // namespace hpctrain::train
