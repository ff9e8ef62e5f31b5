#include "dist/nccl_backend.hpp"

#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace hpctrain::dist {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout, int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
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
