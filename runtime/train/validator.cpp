#include "train/validator.hpp"

#include "common/time.hpp"
#include "dist/progress.hpp"
#include "spec/spec.hpp"
#include "train/device_input.hpp"
#include "train/guards.hpp"
#include "train/replicas.hpp"

namespace hpctrain::train {

ValidatorOptions validator_options_from_spec(const spec::Spec& spec) {
  ValidatorOptions o;
  o.precision = spec.train.precision;
  o.channels_last = spec.train.channels_last;
  o.same_model_checked = spec.train.sync == spec::Sync::kLocalSgd;
  return o;
}

Validator::Validator(const ValidatorOptions& options,
                     std::shared_ptr<const data::ImageSource> source,
                     std::unique_ptr<data::Loader> loader, model::Classifier& model,
                     dist::Communicator& comm)
    : options_(options),
      source_(std::move(source)),
      loader_(std::move(loader)),
      model_(model),
      comm_(comm) {}

EvalResult Validator::run(int64_t step) {
  progress::enter(progress::Phase::kEval);
  const auto t0 = Clock::now();
  sync_buffers(model_, comm_);
  // Local SGD evaluates one model, the ranks' mean (the trainer averages first): checked, as the
  // ranks' models differ between averagings and each would otherwise score its own on its shard.
  if (options_.same_model_checked) verify_identical_weights(model_, comm_, step);
  model_.eval();
  const at::Device device = comm_.device();
  const spec::Precision precision = options_.precision;
  const bool channels_last = options_.channels_last;
  EvalResult r = evaluate(
      [&](const at::Tensor& x) {
        progress::tick();  // a batch evaluated: progress inside the phase
        AutocastGuard autocast(device.type(), precision);
        return model_.forward(x);
      },
      [&](const data::Batch& b) {
        DeviceBatch d = to_device_batch(b, loader_->transform(), device, channels_last);
        return std::make_pair(d.images, d.labels);
      },
      *loader_, source_->size(), comm_);
  model_.train();
  last_seconds_ = seconds_since(t0);
  seconds_ += last_seconds_;
  return r;
}

}  // namespace hpctrain::train
