// The trainer's validator: evaluates the model on the validation set (train/evaluate.hpp) as a
// run needs it: rank 0's batch-norm statistics for every rank, local SGD's one model checked to be
// the same on every rank, autocast as in training, the loader's batches on the device by the
// training's input path. It keeps the total time spent evaluating (not training throughput).
// Thread safety: the training thread only; run() is collective.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "data/loader.hpp"
#include "data/source.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"
#include "spec/choices.hpp"
#include "train/evaluate.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct ValidatorOptions {
  spec::Precision precision = spec::Precision::kFp32;
  bool channels_last = false;
  // Local SGD: the ranks' mean model is evaluated; the ranks must hold the same one (checked).
  bool same_model_checked = false;
};
ValidatorOptions validator_options_from_spec(const spec::Spec& spec);

class Validator {
 public:
  // `source` and `loader`: [data] val for this rank; null: nothing to evaluate.
  Validator(const ValidatorOptions& options, std::shared_ptr<const data::ImageSource> source,
            std::unique_ptr<data::Loader> loader, model::Classifier& model,
            dist::Communicator& comm);

  bool enabled() const { return loader_ != nullptr; }
  // Collective: evaluates the model as it stands after step `step`; the model is left in
  // training mode. Adds the time taken to seconds().
  EvalResult run(int64_t step);
  double last_seconds() const { return last_seconds_; }
  double seconds() const { return seconds_; }  // all evaluations of this process

 private:
  ValidatorOptions options_;
  std::shared_ptr<const data::ImageSource> source_;
  std::unique_ptr<data::Loader> loader_;
  model::Classifier& model_;
  dist::Communicator& comm_;
  double last_seconds_ = 0, seconds_ = 0;
};

}  // namespace hpctrain::train
