#include "train/train_input.hpp"

namespace hpctrain::train {

TrainInput::TrainInput(std::shared_ptr<const data::ImageSource> source,
                       std::unique_ptr<data::Loader> loader, const at::Device& device,
                       bool channels_last, const InputPath& path,
                       std::unique_ptr<std::ofstream> trace)
    : source_(std::move(source)),
      loader_(std::move(loader)),
      path_(path),
      trace_(std::move(trace)) {
  loader_->start_epoch(0, 0);  // the batches of an epoch are known once one is set up
  device_input_ = std::make_unique<DeviceInput>(*loader_, device, channels_last, path_);
}

data::LoaderState TrainInput::skip(int64_t epoch, int64_t consumed, int64_t steps,
                                   int64_t samples_per_step) {
  while (true) {
    start_epoch(epoch, consumed);
    const int64_t left = loader_->num_batches();  // of this epoch, from `consumed` on
    if (steps < left || left == 0) break;
    steps -= left;
    ++epoch;
    consumed = 0;
  }
  if (steps > 0) start_epoch(epoch, consumed + steps * samples_per_step);
  return state();
}

std::optional<DeviceBatch> TrainInput::next(int64_t step) {
  std::optional<DeviceBatch> batch = device_input_->next();
  if (batch && trace_) {
    // Diagnostics: the batch's epoch, step and samples.
    *trace_ << batch->epoch << ' ' << step;
    for (const int64_t sample : batch->samples) *trace_ << ' ' << sample;
    *trace_ << '\n' << std::flush;
  }
  return batch;
}

}  // namespace hpctrain::train
