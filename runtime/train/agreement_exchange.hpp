// The all-reduce of the per-step agreement (train/agreement.hpp) on either input path
// (train/device_input.hpp). The host path reduces a host tensor and reads it at once. The device
// path never waits for the device: the contributions go to the device from pinned memory, the
// caller adds its device-side slot (fp16's inf/NaN verdict), the all-reduce runs there, and the
// agreed values travel back to the host asynchronously, to be read a step later (previous()).
// Thread safety: none; the training thread only.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>

#include <cstdint>
#include <memory>

#include "dist/communicator.hpp"
#include "train/agreement.hpp"

namespace hpctrain::train {

class AgreementExchange {
 public:
  AgreementExchange(dist::Communicator& comm, const at::Device& device);

  // Host path: all-reduces this rank's `slots` and returns the agreement, gathered at `step`;
  // its values hold until the next call.
  Agreed reduce_now(const float* slots, int64_t step);

  // Device path: this rank's `slots` as a tensor on the device (the copy is not waited for).
  at::Tensor stage(const float* slots) const;
  // Device path: all-reduces `agreement` (stage()'s, with the caller's slots added) in place.
  void reduce(at::Tensor& agreement) { comm_.all_reduce(agreement); }
  // Device path: queues the copy of the reduced `agreement`, gathered at `step`, to the host.
  void send_home(const at::Tensor& agreement, int64_t step);
  // Device path: the agreement sent home before the last send_home(), once (it waits for its
  // copy, queued a step ago); none on the first step. Its values hold until the next call.
  Agreed previous();

 private:
  struct InFlight {
    at::Tensor values;                   // Agreement::kSize floats on the host
    std::shared_ptr<c10::Event> copied;  // CUDA: recorded after the copy
  };

  dist::Communicator& comm_;
  at::Device device_;
  OneStepLate<InFlight> in_flight_;
  float agreed_[Agreement::kSize] = {};
};

}  // namespace hpctrain::train
