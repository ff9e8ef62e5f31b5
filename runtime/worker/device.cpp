#include "worker/device.hpp"

#include <dlfcn.h>

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "common/error.hpp"
#include "worker/device_choice.hpp"

namespace hpctrain::worker {
namespace {

std::string cuda_version_text(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// The driver API, loaded by hand: it is the driver's own library (not in the wheel), and asking
// it works where libtorch's CUDA initialisation failed.
std::string describe_driver() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = ::dlerror();
    return std::string("no NVIDIA driver: libcuda.so.1 cannot be loaded (") +
           (why ? why : "unknown") + ")";
  }
  using IntFn = int (*)(int*);
  using InitFn = int (*)(unsigned);
  using NameFn = int (*)(int, const char**);
  auto driver_version = reinterpret_cast<IntFn>(::dlsym(lib, "cuDriverGetVersion"));
  auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<IntFn>(::dlsym(lib, "cuDeviceGetCount"));
  auto error_name = reinterpret_cast<NameFn>(::dlsym(lib, "cuGetErrorName"));
  std::string out = "NVIDIA driver loaded";
  int version = 0;
  if (driver_version && driver_version(&version) == 0) {
    out += ", supports CUDA up to " + cuda_version_text(version);
  }
  if (init) {
    const int rc = init(0);
    if (rc != 0) {
      const char* name = nullptr;
      if (error_name) error_name(rc, &name);
      out += ", cuInit failed: " + std::string(name ? name : "error " + std::to_string(rc));
    } else if (int n = 0; count && count(&n) == 0) {
      out += ", " + std::to_string(n) + " device(s) visible";
    }
  }
  ::dlclose(lib);
  return out;
}

}  // namespace

bool cuda_available() {
#ifdef HPCTRAIN_WITH_NCCL
  return torch::cuda::is_available();
#else
  return false;  // a CPU build: Gloo even where libtorch could see a GPU
#endif
}

std::string minimum_driver_for_cuda(int cuda_version) {
  // NVIDIA's CUDA toolkit release notes, table 3 ("CUDA Toolkit and Corresponding Driver
  // Versions"), Linux x86_64, the GA release of each toolkit.
  struct Row {
    int cuda;
    const char* driver;
  };
  static constexpr Row kRows[] = {{13000, "580.65.06"}, {12090, "575.51.03"}, {12080, "570.26"},
                                  {12060, "560.28.03"}, {12040, "550.54.14"}, {12010, "530.30.02"},
                                  {11080, "520.61.05"}};
  for (const Row& row : kRows) {
    if (cuda_version / 10 == row.cuda / 10) return row.driver;
  }
  return {};
}

std::string cuda_diagnosis() {
  std::string out = describe_driver();
#ifdef HPCTRAIN_WITH_NCCL
  const long runtime = at::detail::getCUDAHooks().versionCUDART();
  out += "; libtorch " + std::to_string(TORCH_VERSION_MAJOR) + "." +
         std::to_string(TORCH_VERSION_MINOR) + "." + std::to_string(TORCH_VERSION_PATCH) +
         " is built for CUDA " + cuda_version_text(static_cast<int>(runtime));
  const std::string minimum = minimum_driver_for_cuda(static_cast<int>(runtime));
  if (!minimum.empty()) out += ", which needs an NVIDIA driver >= " + minimum;
#else
  out +=
      "; this hpctrain-worker is a CPU build (configured with HPCTRAIN_CUDA=OFF or without a "
      "CUDA toolkit): rebuild it with -DHPCTRAIN_CUDA=ON (docs/install.md)";
#endif
  return out;
}

void require_cuda(int gpus_per_node, const dist::WorldInfo& world, const dist::EnvMap& env) {
  if (gpus_per_node <= 0 || cuda_available()) return;
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  HPCTRAIN_THROW(
      rt::Error,
      "the spec asks for GPUs (job.gpus_per_node = " + std::to_string(gpus_per_node) +
          ") but rank " + std::to_string(world.rank) + " of " + std::to_string(world.world_size) +
          " on " + world.hostname + " cannot use CUDA: " + cuda_diagnosis() +
          " (CUDA_VISIBLE_DEVICES=" + (it == env.end() ? std::string("unset") : it->second) +
          "); hpctrain never trains a GPU job on the CPU");
}

int bind_device(int local_rank, const dist::EnvMap& env) {
  const int visible = static_cast<int>(torch::cuda::device_count());
  // The NCCL backend makes it the current device when it starts (dist/nccl_backend.cpp).
  return choose_device(local_rank, env, visible);
}

std::string describe_device(int local_rank, const dist::EnvMap& env) {
  const int visible = static_cast<int>(torch::cuda::device_count());
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  return "cuda:" + std::to_string(choose_device(local_rank, env, visible)) + " of " +
         std::to_string(visible) +
         " visible (CUDA_VISIBLE_DEVICES=" + (it == env.end() ? std::string("unset") : it->second) +
         ")";
}

}  // namespace hpctrain::worker
