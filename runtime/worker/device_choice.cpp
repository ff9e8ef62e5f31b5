#include "worker/device_choice.hpp"

#include <string>

#include "common/error.hpp"

namespace hpctrain::worker {

int choose_device(int local_rank, const dist::EnvMap& env, int visible) {
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

}  // namespace hpctrain::worker
