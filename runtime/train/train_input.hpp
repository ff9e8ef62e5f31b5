// The training set as the training loop reads it: this rank's loader over the training source,
// its batches on the device by the input path (train/device_input.hpp), the position a checkpoint
// records, and the tests' sample trace.
// Thread safety: the training thread only.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>

#include "data/loader.hpp"
#include "data/source.hpp"
#include "train/device_input.hpp"

namespace hpctrain::train {

class TrainInput {
 public:
  // `trace`: TrainHooks::trace_samples' file for this rank, or null.
  TrainInput(std::shared_ptr<const data::ImageSource> source, std::unique_ptr<data::Loader> loader,
             const at::Device& device, bool channels_last, const InputPath& path,
             std::unique_ptr<std::ofstream> trace);

  const data::DatasetInfo& info() const { return source_->info(); }
  int64_t steps_per_epoch() const { return loader_->num_batches(); }
  const InputPath& path() const { return path_; }

  void start_epoch(int64_t epoch, int64_t consumed) { device_input_->start_epoch(epoch, consumed); }
  // The device path's raw batches and their normalisation (DeviceInput::set_raw).
  void set_raw(bool raw) { device_input_->set_raw(raw); }
  at::Tensor normalise(const at::Tensor& raw) const { return device_input_->normalise(raw); }
  // The batch of the step after `step` completed steps, on the device (traced when asked);
  // nullopt at the end of the epoch.
  std::optional<DeviceBatch> next(int64_t step);
  // The position after the last batch handed out.
  data::LoaderState state() const { return device_input_->state(); }
  // Moves to the position `steps` steps after (epoch, consumed), each of `samples_per_step`
  // samples, without reading their batches (the divergence rollback skips them), and starts
  // reading there; returns that position. An epoch's end is a step's: the steps run on into the
  // next epoch as training would.
  data::LoaderState skip(int64_t epoch, int64_t consumed, int64_t steps, int64_t samples_per_step);

 private:
  std::shared_ptr<const data::ImageSource> source_;
  std::unique_ptr<data::Loader> loader_;
  InputPath path_;
  std::unique_ptr<DeviceInput> device_input_;
  std::unique_ptr<std::ofstream> trace_;
};

}  // namespace hpctrain::train
