// worker/device_choice.hpp: local rank -> device when every task sees the node's GPUs, device 0
// when Slurm leaves each task one, and an error naming CUDA_VISIBLE_DEVICES and the spec's fix
// when a node has fewer visible GPUs than local ranks.
#include "worker/device_choice.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"

namespace hpctrain::worker {
namespace {

TEST(ChooseDevice, EachLocalRankTakesItsOwnGpuWhenAllAreVisible) {
  const dist::EnvMap env{{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}};
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    EXPECT_EQ(choose_device(local_rank, env, /*visible=*/4), local_rank);
  }
}

TEST(ChooseDevice, EveryLocalRankTakesDeviceZeroWhenSlurmLeftOneVisible) {
  // --gpus-per-task=1: local rank 2 sees only its own GPU, renumbered 0.
  const dist::EnvMap env{{"CUDA_VISIBLE_DEVICES", "2"}};
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    EXPECT_EQ(choose_device(local_rank, env, /*visible=*/1), 0);
  }
}

TEST(ChooseDevice, FewerGpusThanLocalRanksNamesTheVariableAndTheFix) {
  const dist::EnvMap env{{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}};
  std::string message;
  try {
    choose_device(/*local_rank=*/4, env, /*visible=*/4);
  } catch (const rt::Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("local rank 4"), std::string::npos) << message;
  EXPECT_NE(message.find("only 4 are visible"), std::string::npos) << message;
  EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES=0,1,2,3"), std::string::npos) << message;
  EXPECT_NE(message.find("gpus_per_node = tasks_per_node"), std::string::npos) << message;
}

TEST(ChooseDevice, UnsetVisibleDevicesIsNamedAsUnset) {
  std::string message;
  try {
    choose_device(/*local_rank=*/2, {}, /*visible=*/2);
  } catch (const rt::Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("CUDA_VISIBLE_DEVICES=unset"), std::string::npos) << message;
}

}  // namespace
}  // namespace hpctrain::worker
