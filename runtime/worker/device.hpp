// GPU binding: local rank -> device, respecting CUDA_VISIBLE_DEVICES as Slurm sets it
// (--gpus-per-task, --gpu-bind). Without CUDA in the build, or without a GPU, cuda_available()
// is false and the worker runs on CPU with Gloo.
// Thread safety: call from the main thread before training starts.
#pragma once

#include <string>

#include "dist/world.hpp"

namespace hpctrain::worker {

bool cuda_available();
// The device index this rank uses: local_rank when it sees all of the node's GPUs, 0 when
// Slurm already restricted CUDA_VISIBLE_DEVICES to one GPU per task. Sets it as the current
// device. Throws rt::Error when there are fewer visible GPUs than local ranks need.
int bind_device(int local_rank, const dist::EnvMap& env);
// "cuda:N (name, CUDA_VISIBLE_DEVICES=...)" without binding.
std::string describe_device(int local_rank, const dist::EnvMap& env);

}  // namespace hpctrain::worker
