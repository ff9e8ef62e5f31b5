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
