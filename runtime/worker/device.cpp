#include "worker/device.hpp"

#include <torch/cuda.h>

#include "common/error.hpp"

namespace hpctrain::worker {
namespace {

int choose(int local_rank, const dist::EnvMap& env, int visible) {
  // Slurm with --gpus-per-task=1 (or --gpu-bind=single:1) leaves each task exactly one visible
  // GPU: index 0. Otherwise every task of the node sees all GPUs and takes its local rank's.
  if (visible == 1) return 0;
  if (local_rank >= visible) {
    auto it = env.find("CUDA_VISIBLE_DEVICES");
    HPCTRAIN_THROW(rt::Error, "local rank " + std::to_string(local_rank) +
                                  " needs a GPU but only " + std::to_string(visible) +
                                  " are visible (CUDA_VISIBLE_DEVICES=" +
                                  (it == env.end() ? std::string("unset") : it->second) +
                                  "); request one GPU per task (gpus_per_node = tasks_per_node)");
  }
  return local_rank;
}

}  // namespace

bool cuda_available() { return torch::cuda::is_available(); }

int bind_device(int local_rank, const dist::EnvMap& env) {
  const int visible = static_cast<int>(torch::cuda::device_count());
  // The NCCL backend makes it the current device when it starts (dist/nccl_backend.cpp).
  return choose(local_rank, env, visible);
}

std::string describe_device(int local_rank, const dist::EnvMap& env) {
  const int visible = static_cast<int>(torch::cuda::device_count());
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  return "cuda:" + std::to_string(choose(local_rank, env, visible)) + " of " +
         std::to_string(visible) +
         " visible (CUDA_VISIBLE_DEVICES=" + (it == env.end() ? std::string("unset") : it->second) +
         ")";
}

}  // namespace hpctrain::worker
