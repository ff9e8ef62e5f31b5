// The training loop's input: each batch of a data::Loader as tensors on the training device.
//
// Two paths:
// - host (CPU training): the loader writes normalised float32 batches and the tensors wrap its
//   buffer (no copy), as always.
// - device (GPU training): the loader writes uint8 NHWC batches, a quarter of the bytes, into
//   pinned host memory from PyTorch's CUDA host allocator; the next batch is copied to the GPU on
//   a side stream while the current one trains, and the conversion to float, the normalisation
//   (v * scale + bias, the loader's own statistics) and the memory format happen on the GPU.
//   The device path also runs on the CPU (without streams or pinned memory) when asked
//   (HPCTRAIN_GPU_PATH_ON_CPU, docs/runtime.md), which is how its logic is tested without a GPU.
//
// With prefetching the loader runs one batch ahead of the batch handed out; state() is the
// position after the batch handed out last, which is what a checkpoint must record.
// Thread safety: one thread (the training loop).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "data/loader.hpp"

namespace hpctrain::train {

struct InputPath {
  bool device = false;    // uint8 NHWC batches, normalised on the device
  bool pinned = false;    // batch buffers from the CUDA host allocator
  bool prefetch = false;  // the next batch is fetched (and on CUDA copied) ahead
};

// The device path on a CUDA device, or everywhere when `device_path_on_cpu`; the host path
// otherwise.
InputPath choose_input_path(const at::Device& device, bool device_path_on_cpu);
// Sets the loader's output type, layout and allocator for `path` (nothing for the host path).
void configure_loader(data::LoaderConfig& config, const InputPath& path);

struct DeviceBatch {
  at::Tensor images;  // float32 N x C x H x W (channels_last strides when asked), on the device
  // Raw batches (DeviceInput::set_raw, the static step's): uint8 N x H x W x C on the device, not
  // normalised (DeviceInput::normalise() does that), and `images` undefined. On the CPU a view of
  // the loader's buffer, valid until the next batch.
  at::Tensor raw;
  at::Tensor labels;  // int64 N, on the device
  int64_t epoch = 0;
  std::vector<int64_t> samples;  // global sample indices
};

// One host batch as device tensors, by either path: on the host path a view of the batch's
// buffer (the batch must outlive it); on the device path a normalised float copy.
DeviceBatch to_device_batch(const data::Batch& batch, const data::Transform& transform,
                            const at::Device& device, bool channels_last);

class DeviceInput {
 public:
  DeviceInput(data::Loader& loader, const at::Device& device, bool channels_last, InputPath path);
  ~DeviceInput();
  DeviceInput(const DeviceInput&) = delete;
  DeviceInput& operator=(const DeviceInput&) = delete;

  void start_epoch(int64_t epoch, int64_t consumed);
  // The device path: hand out raw uint8 batches, for the caller to normalise (the static step
  // normalises inside its graph).
  void set_raw(bool raw);
  // A raw batch's images normalised as next() would have: float32, channels_last when asked.
  at::Tensor normalise(const at::Tensor& raw) const;
  // The next batch on the device, or nullopt at the end of the epoch. On CUDA the images may
  // still be arriving: the current stream waits for them, the host does not.
  std::optional<DeviceBatch> next();
  // The loader's position after the last batch handed out.
  data::LoaderState state() const { return state_; }

 private:
  // A batch taken from the loader: its host buffer, and on CUDA its device copy in flight.
  struct Staged {
    data::Batch host;
    data::LoaderState after;       // the loader's position once this batch is consumed
    at::Tensor images, labels;     // device copies (CUDA), not yet normalised
    std::shared_ptr<void> copied;  // CUDA: the event recorded after the copies
  };
  std::optional<Staged> stage();  // takes the loader's next batch and starts its copy
  DeviceBatch finish(Staged& staged);

  data::Loader& loader_;
  at::Device device_;
  bool channels_last_;
  InputPath path_;
  bool raw_ = false;
  data::LoaderState state_;
  std::pair<at::Tensor, at::Tensor> scale_bias_;  // the device path's normalisation, on device_
  // The batch fetched ahead (prefetching): unset before the epoch's first next(), set to an empty
  // optional at the end of the epoch.
  std::optional<std::optional<Staged>> ahead_;
  // The host batch of the current step, kept alive while the tensors of the host path view it.
  std::unique_ptr<data::Batch> current_;
  struct CudaState;
  std::unique_ptr<CudaState> cuda_;
};

}  // namespace hpctrain::train
