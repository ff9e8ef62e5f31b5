// Makes a read of tensor data on the host an error inside a scope: the static step's body
// (train/static_step.hpp) must not wait for the device, or a CUDA graph could not hold it and a
// replay would run on a stale value. On a GPU a capture fails on such a read; the guard catches
// it on every device, the CPU included, where the step's eager twin runs in CI.
//
// It watches the ATen operators the scope calls itself (a thread-local RecordFunction callback):
// an operator that hands a tensor's value to the host (item, _local_scalar_dense, is_nonzero,
// equal, allclose, nonzero, masked_select, unique, ...) called at the top level is a host read.
// Reads nested inside another operator are that operator's own (torch's CPU kernels of the fused
// optimizers read their learning-rate tensor; the CUDA kernels read it on the device).
// Thread safety: one scope per thread at a time; it sees the ops of the thread that made it and
// of the autograd work that thread runs.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain::train {

class HostReadGuard {
 public:
  HostReadGuard();
  ~HostReadGuard();
  HostReadGuard(const HostReadGuard&) = delete;
  HostReadGuard& operator=(const HostReadGuard&) = delete;

  // The first host read seen since the guard began ("" when none).
  std::string first_read() const;
  // Throws rt::Error naming the first host read in `where`, if any.
  void check(const std::string& where) const;

 private:
  uint64_t handle_ = 0;
};

}  // namespace hpctrain::train
