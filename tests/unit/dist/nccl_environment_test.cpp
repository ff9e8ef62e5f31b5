// dist/nccl_environment.hpp: c10d's NCCL error handling always CleanUpOnly (2), and its
// watchdog monitor's timeout max(480 s, collective deadline + 120 s) unless the user set one.
#include "dist/nccl_environment.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

namespace hpctrain::dist {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::map<std::string, std::string> as_map(
    const std::vector<std::pair<std::string, std::string>>& settings) {
  return {settings.begin(), settings.end()};
}

TEST(NcclEnvironment, ErrorHandlingIsCleanUpOnlyEvenWhenTheUserSetAnother) {
  const auto set =
      as_map(nccl_environment(seconds(60), {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}));
  EXPECT_EQ(set.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "2");
}

TEST(NcclEnvironment, MonitorTimeoutIsAtLeastTorchsDefault) {
  // 60 s + 120 s is under c10d's 480 s: keep 480.
  EXPECT_EQ(as_map(nccl_environment(seconds(60), {})).at("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
            "480");
  // 360 s + 120 s is exactly 480 s.
  EXPECT_EQ(as_map(nccl_environment(seconds(360), {})).at("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
            "480");
}

TEST(NcclEnvironment, MonitorTimeoutIsTheDeadlinePlus120SecondsAbove480) {
  EXPECT_EQ(as_map(nccl_environment(seconds(600), {})).at("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
            "720");
  // Milliseconds count in whole seconds.
  EXPECT_EQ(
      as_map(nccl_environment(milliseconds(1'800'500), {})).at("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"),
      "1920");
}

TEST(NcclEnvironment, UsersMonitorTimeoutIsKept) {
  const auto set =
      as_map(nccl_environment(seconds(600), {{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "100"}}));
  EXPECT_EQ(set.count("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"), 0u);
  EXPECT_EQ(set.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "2");
}

TEST(NcclEnvironment, AnEmptyMonitorTimeoutCountsAsUnset) {
  const auto set =
      as_map(nccl_environment(seconds(600), {{"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", ""}}));
  EXPECT_EQ(set.at("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"), "720");
}

}  // namespace
}  // namespace hpctrain::dist
