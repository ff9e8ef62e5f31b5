// Scopes the training step runs under: autocast as torch.autocast(device, dtype) sets it, and
// CUDA's sync debug mode (torch.cuda.set_sync_debug_mode). Each restores the previous state on
// exit.
// Thread safety: the thread that made it (autocast and the sync debug mode are thread-local or
// process-wide in torch).
#pragma once

#include <ATen/autocast_mode.h>
#ifdef HPCTRAIN_WITH_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "spec/choices.hpp"

namespace hpctrain::train {

// Mixed precision for the forward pass, as torch.autocast(device, dtype) does.
class AutocastGuard {
 public:
  AutocastGuard(at::DeviceType device, spec::Precision precision)
      : device_(device), enabled_(precision != spec::Precision::kFp32) {
    if (!enabled_) return;
    previous_enabled_ = at::autocast::is_autocast_enabled(device_);
    previous_dtype_ = at::autocast::get_autocast_dtype(device_);
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(
        device_, precision == spec::Precision::kFp16 ? at::kHalf : at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (!enabled_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, previous_enabled_);
    at::autocast::set_autocast_dtype(device_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  at::DeviceType device_;
  bool enabled_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

// CUDA's sync debug mode for a scope: 1 warns, 2 throws on every operation that makes the host
// wait for the GPU. Nothing in CPU builds.
class SyncDebugScope {
 public:
  explicit SyncDebugScope(int mode) {
#ifdef HPCTRAIN_WITH_NCCL
    previous_ = static_cast<int>(c10::cuda::warning_state().get_sync_debug_mode());
    c10::cuda::warning_state().set_sync_debug_mode(static_cast<c10::cuda::SyncDebugMode>(mode));
#else
    (void)mode;
#endif
  }
  ~SyncDebugScope() {
#ifdef HPCTRAIN_WITH_NCCL
    c10::cuda::warning_state().set_sync_debug_mode(
        static_cast<c10::cuda::SyncDebugMode>(previous_));
#endif
  }
  SyncDebugScope(const SyncDebugScope&) = delete;
  SyncDebugScope& operator=(const SyncDebugScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace hpctrain::train
