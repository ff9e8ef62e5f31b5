// Which GPU a rank uses, as a pure function of its local rank, the GPUs it sees and its
// environment (for the error message): worker/device.hpp's bind_device() asks libtorch how many
// devices are visible and applies this rule. Torch-free, so its tests run in every build.
// Thread safety: a pure function.
#pragma once

#include "dist/world.hpp"

namespace hpctrain::worker {

// The device index of `local_rank` when `visible` GPUs are visible: 0 when Slurm left the task
// exactly one (--gpus-per-task=1, --gpu-bind=single:1), otherwise local_rank, every task of the
// node seeing all of its GPUs. Throws rt::Error naming CUDA_VISIBLE_DEVICES (from `env`) and
// gpus_per_node = tasks_per_node when there are fewer visible GPUs than local ranks.
int choose_device(int local_rank, const dist::EnvMap& env, int visible);

}  // namespace hpctrain::worker
