#include "dist/nccl_backend.hpp"

#include <c10/cuda/CUDAFunctions.h>
#include <stdlib.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "dist/nccl_environment.hpp"
#include "dist/world.hpp"

namespace hpctrain::dist {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout, int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  // Before the process group exists: c10d reads them in its constructor (dist/nccl_environment.hpp
  // says why each value).
  for (const auto& [name, value] : nccl_environment(timeout, current_environment())) {
    ::setenv(name.c_str(), value.c_str(), /*overwrite=*/1);
  }
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
