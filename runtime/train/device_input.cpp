#include "train/device_input.hpp"

#include <ATen/ATen.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>

#ifdef HPCTRAIN_WITH_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "common/error.hpp"

namespace hpctrain::train {
namespace {

// Batch buffers from PyTorch's CUDA host allocator (page-locked, cached): the loader's pool keeps
// them for the whole run, so each is allocated once.
data::BufferAllocator cuda_host_allocator() {
  struct Owned {
    std::mutex mu;
    std::unordered_map<void*, at::DataPtr> blocks;
  };
  auto owned = std::make_shared<Owned>();
  at::Allocator* allocator = at::detail::getCUDAHooks().getPinnedMemoryAllocator();
  return {[owned, allocator](size_t bytes) -> void* {
            at::DataPtr block = allocator->allocate(bytes);
            void* p = block.get();
            std::lock_guard<std::mutex> lock(owned->mu);
            owned->blocks.emplace(p, std::move(block));
            return p;
          },
          [owned](void* p, size_t /*bytes*/) {
            std::lock_guard<std::mutex> lock(owned->mu);
            owned->blocks.erase(p);
          }};
}

// The per-channel (scale, bias) of `transform` as 1 x C x 1 x 1 tensors on `device`. Made once
// per loader: a copy from pageable memory to a GPU waits for the device.
std::pair<at::Tensor, at::Tensor> normalisation(const data::Transform& transform,
                                                const at::Device& device) {
  const auto c = static_cast<int64_t>(transform.normalise_scale().size());
  const auto on = at::TensorOptions().dtype(at::kFloat);
  auto to_device = [&](const std::vector<float>& v) {
    return at::from_blob(const_cast<float*>(v.data()), {1, c, 1, 1}, on).to(device);
  };
  return {to_device(transform.normalise_scale()), to_device(transform.normalise_bias())};
}

// uint8 N x H x W x C (any device) -> float32 N x C x H x W normalised per channel, as the
// loader's float output is: v * scale + bias, rounded after the product and after the sum.
at::Tensor normalise(const at::Tensor& nhwc, const std::pair<at::Tensor, at::Tensor>& scale_bias,
                     bool channels_last) {
  // NCHW sizes over the NHWC bytes: channels_last strides, which the conversion keeps.
  at::Tensor x = nhwc.permute({0, 3, 1, 2}).to(at::kFloat);
  x.mul_(scale_bias.first).add_(scale_bias.second);
  return channels_last ? x : x.contiguous();
}

at::Tensor host_images(const data::Batch& batch) {
  const auto n = batch.size;
  if (batch.output == data::OutputType::kUint8) {
    if (batch.layout != data::Layout::kNHWC) {
      HPCTRAIN_THROW(rt::Error, "uint8 batches must be NHWC for the device path");
    }
    return at::from_blob(batch.data(), {n, batch.height, batch.width, batch.channels}, at::kByte);
  }
  return batch.layout == data::Layout::kNHWC
             ? at::from_blob(batch.data(), {n, batch.height, batch.width, batch.channels},
                             at::kFloat)
                   .permute({0, 3, 1, 2})  // NCHW sizes, channels_last strides
             : at::from_blob(batch.data(), {n, batch.channels, batch.height, batch.width},
                             at::kFloat);
}

at::Tensor host_labels(const data::Batch& batch) {
  // The labels vector is not modified while the tensor lives; from_blob wants non-const.
  return at::from_blob(const_cast<int64_t*>(batch.labels.data()), {batch.size}, at::kLong);
}

}  // namespace

InputPath choose_input_path(const at::Device& device, bool device_path_on_cpu) {
  InputPath path;
  if (device.is_cuda()) {
    path.device = path.pinned = path.prefetch = true;
  } else if (device_path_on_cpu) {
    path.device = path.prefetch = true;
  }
  return path;
}

void configure_loader(data::LoaderConfig& config, const InputPath& path) {
  if (!path.device) return;
  config.transform.output = data::OutputType::kUint8;
  config.transform.layout = data::Layout::kNHWC;
  if (path.pinned) config.allocator = cuda_host_allocator();
}

DeviceBatch to_device_batch(const data::Batch& batch, const data::Transform& transform,
                            const at::Device& device, bool channels_last) {
  DeviceBatch out;
  out.epoch = batch.epoch;
  out.samples = batch.samples;
  at::Tensor images = host_images(batch);
  at::Tensor labels = host_labels(batch);
  if (batch.output == data::OutputType::kUint8) {
    out.images = normalise(images.to(device), normalisation(transform, device), channels_last);
    out.labels = labels.to(device);  // a copy: the batch may go
  } else {
    out.images = device.is_cpu() ? images : images.to(device);
    out.labels = device.is_cpu() ? labels : labels.to(device);
  }
  return out;
}

#ifdef HPCTRAIN_WITH_NCCL
struct DeviceInput::CudaState {
  explicit CudaState(c10::DeviceIndex index)
      : side(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index)) {}
  c10::cuda::CUDAStream side;
  // Host batches whose copy to the device may still run, with the event recorded after it: a
  // buffer goes back to the loader's pool only once its copy is done.
  std::deque<std::pair<data::Batch, std::shared_ptr<at::cuda::CUDAEvent>>> copying;

  void release_copied() {
    while (!copying.empty() && copying.front().second->query()) copying.pop_front();
    // The pool allocates more buffers while these wait; bound them (a copy queued two steps ago
    // is long finished unless the device is far behind).
    while (copying.size() > 4) {
      copying.front().second->synchronize();
      copying.pop_front();
    }
  }
};
#else
struct DeviceInput::CudaState {};
#endif

DeviceInput::DeviceInput(data::Loader& loader, const at::Device& device, bool channels_last,
                         InputPath path)
    : loader_(loader), device_(device), channels_last_(channels_last), path_(path) {
  if (path_.device) scale_bias_ = normalisation(loader_.transform(), device_);
  if (device_.is_cuda()) {
#ifdef HPCTRAIN_WITH_NCCL
    cuda_ = std::make_unique<CudaState>(device_.index());
#else
    HPCTRAIN_THROW(rt::Error, "a CUDA device in a build without CUDA");
#endif
  }
}

DeviceInput::~DeviceInput() = default;

void DeviceInput::start_epoch(int64_t epoch, int64_t consumed) {
#ifdef HPCTRAIN_WITH_NCCL
  // A batch fetched ahead and never handed out: its copy may still read the host buffer.
  if (cuda_ && ahead_ && *ahead_) {
    cuda_->copying.emplace_back(std::move((*ahead_)->host),
                                std::static_pointer_cast<at::cuda::CUDAEvent>((*ahead_)->copied));
  }
#endif
  ahead_.reset();
  current_.reset();
  loader_.start_epoch(epoch, consumed);
  state_ = loader_.state();
}

std::optional<DeviceInput::Staged> DeviceInput::stage() {
  std::optional<data::Batch> batch = loader_.next();
  if (!batch) return std::nullopt;
  Staged s;
  s.after = loader_.state();
  s.host = std::move(*batch);
#ifdef HPCTRAIN_WITH_NCCL
  if (cuda_) {
    cuda_->release_copied();
    const c10::cuda::CUDAStreamGuard guard(cuda_->side);
    // Labels through a pinned block of the host allocator too: it records the copy's use, so
    // the block is not reused before the copy is done.
    at::Tensor labels =
        at::empty({s.host.size}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
    std::memcpy(labels.data_ptr(), s.host.labels.data(), s.host.labels.size() * sizeof(int64_t));
    s.images = host_images(s.host).to(device_, /*non_blocking=*/true);
    s.labels = labels.to(device_, /*non_blocking=*/true);
    auto copied = std::make_shared<at::cuda::CUDAEvent>();
    copied->record(cuda_->side);
    s.copied = copied;
  }
#endif
  return s;
}

DeviceBatch DeviceInput::finish(Staged& s) {
  state_ = s.after;
#ifdef HPCTRAIN_WITH_NCCL
  if (cuda_) {
    DeviceBatch out;
    out.epoch = s.host.epoch;
    out.samples = s.host.samples;
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
    auto copied = std::static_pointer_cast<at::cuda::CUDAEvent>(s.copied);
    copied->block(current);  // the GPU waits for the copy, the host does not
    // Made on the side stream, used on the current one: the caching allocator must not hand
    // the memory out again before the current stream is done with it.
    c10::cuda::CUDACachingAllocator::recordStream(s.images.storage().data_ptr(), current);
    c10::cuda::CUDACachingAllocator::recordStream(s.labels.storage().data_ptr(), current);
    if (raw_) {
      out.raw = s.images;
    } else {
      out.images = train::normalise(s.images, scale_bias_, channels_last_);
    }
    out.labels = s.labels;
    cuda_->copying.emplace_back(std::move(s.host), std::move(copied));
    return out;
  }
#endif
  // The CPU: the host path's tensors view the batch, which lives until the next step.
  current_ = std::make_unique<data::Batch>(std::move(s.host));
  if (raw_) {
    DeviceBatch out;
    out.epoch = current_->epoch;
    out.samples = current_->samples;
    out.raw = host_images(*current_);
    out.labels = host_labels(*current_);
    return out;
  }
  return to_device_batch(*current_, loader_.transform(), device_, channels_last_);
}

void DeviceInput::set_raw(bool raw) {
  if (raw && !path_.device) {
    HPCTRAIN_THROW(rt::Error, "raw batches are the device path's (uint8 input)");
  }
  raw_ = raw;
}

at::Tensor DeviceInput::normalise(const at::Tensor& raw) const {
  return train::normalise(raw, scale_bias_, channels_last_);
}

std::optional<DeviceBatch> DeviceInput::next() {
  current_.reset();  // the last step's batch goes back to the loader's pool before the next read
  if (!path_.prefetch) {
    std::optional<Staged> s = stage();
    if (!s) return std::nullopt;
    return finish(*s);
  }
  if (!ahead_) ahead_ = stage();  // the epoch's first batch
  if (!*ahead_) return std::nullopt;
  Staged s = std::move(**ahead_);
  *ahead_ = stage();  // the next batch's copy runs while this one trains
  return finish(s);
}

}  // namespace hpctrain::train
