#include "dist/nccl_backend.hpp"

#include <c10/cuda/CUDAFunctions.h>
#include <stdlib.h>

#include <algorithm>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace hpctrain::dist {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout, int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  // A collective past the deadline: by default (3, SkipCleanUp) c10d's watchdog thread rethrows
  // and the process dies of SIGABRT before hpctrain can name the lost rank. CleanUpOnly (2)
  // aborts the communicators and leaves the process to us: the heartbeat ends it with its exit
  // status (76) when a peer is gone, and the next collective fails with the ranks named (1).
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/1);
  // The watchdog's own monitor aborts the process when the watchdog is stuck for this long
  // (default 480 s): after the collective deadline, never before it.
  const auto monitor_s = std::max<int64_t>(
      480, std::chrono::duration_cast<std::chrono::seconds>(timeout).count() + 120);
  ::setenv("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", std::to_string(monitor_s).c_str(), /*overwrite=*/0);
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  const at::Device cuda(at::kCUDA, static_cast<c10::DeviceIndex>(device));
  auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  // Bind to this rank's GPU and create the communicator now.
  pg->setBoundDeviceId(cuda);
  pg->eagerConnectSingleDevice(cuda);
  return pg;
}

}  // namespace hpctrain::dist
