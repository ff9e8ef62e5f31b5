// GPU binding: local rank -> device, respecting CUDA_VISIBLE_DEVICES as Slurm sets it
// (--gpus-per-task, --gpu-bind), and the check that a rank of a GPU job really has a GPU: a spec
// with job.gpus_per_node > 0 never runs on the CPU. Without a GPU the error names the driver and
// CUDA versions found and the driver the linked libtorch needs (cuda_diagnosis()).
// Thread safety: call from the main thread before training starts.
#pragma once

#include <string>

#include "dist/world.hpp"

namespace hpctrain::worker {

// True when this build has the NCCL backend and libtorch sees a usable CUDA device.
bool cuda_available();
// Why CUDA is (un)usable here, for an error message: the NVIDIA driver (libcuda.so.1 loaded or
// not, the CUDA version it supports, cuInit's verdict, the devices it sees), the CUDA runtime
// libtorch was built with and the minimum driver that needs. One line, no trailing period.
std::string cuda_diagnosis();
// The minimum Linux driver of a CUDA toolkit release (major * 1000 + minor * 10, as
// cudaRuntimeGetVersion reports it), e.g. "580.65.06" for 13000; empty when unknown.
std::string minimum_driver_for_cuda(int cuda_version);
// Throws rt::Error when the spec asks for GPUs (gpus_per_node > 0) and this rank cannot use one,
// with cuda_diagnosis() and CUDA_VISIBLE_DEVICES in the message.
void require_cuda(int gpus_per_node, const dist::WorldInfo& world, const dist::EnvMap& env);
// The device index this rank uses: local_rank when it sees all of the node's GPUs, 0 when
// Slurm already restricted CUDA_VISIBLE_DEVICES to one GPU per task. Sets it as the current
// device. Throws rt::Error when there are fewer visible GPUs than local ranks need.
int bind_device(int local_rank, const dist::EnvMap& env);
// "cuda:N (name, CUDA_VISIBLE_DEVICES=...)" without binding.
std::string describe_device(int local_rank, const dist::EnvMap& env);

}  // namespace hpctrain::worker
