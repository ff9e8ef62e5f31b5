// The run directory's names: what the store writes is what status, list and report parse back,
// and nothing else parses as a step or a task.
#include "common/run_layout.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace hpctrain::layout {
namespace {

TEST(RunLayout, CheckpointNamesRoundTripAndSortLikeSteps) {
  for (const int64_t step : {int64_t{0}, int64_t{7}, int64_t{200}, int64_t{999999999},
                             int64_t{1000000000}, INT64_C(123456789012345678)}) {
    const std::string name = checkpoint_name(step);
    EXPECT_EQ(parse_checkpoint_name(name), step) << name;
    EXPECT_EQ(parse_checkpoint_temp_name(checkpoint_temp_name(step)), step) << name;
    EXPECT_FALSE(parse_checkpoint_temp_name(name)) << name;
    EXPECT_FALSE(parse_checkpoint_name(checkpoint_temp_name(step))) << name;
  }
  EXPECT_EQ(checkpoint_name(200), "step-000000200");
  EXPECT_EQ(checkpoint_temp_name(200), ".step-000000200.tmp");
  EXPECT_LT(checkpoint_name(99), checkpoint_name(100));
}

TEST(RunLayout, OnlyTheStoresSpellingIsAStep) {
  for (const char* other :
       {"step-12", "step-0000000012", "step-", "step-x", "step--00000001", "step-00000001a",
        "Step-000000012", "step-000000012/", "x-000000012", "step-1234567890123456789",
        ".step-12.tmp", "step-000000012.tmp", ".step-000000012", ".step-000000012.tmp.x"}) {
    EXPECT_FALSE(parse_checkpoint_name(other)) << other;
    EXPECT_FALSE(parse_checkpoint_temp_name(other)) << other;
  }
}

TEST(RunLayout, TaskFoldersLogsAndManifest) {
  EXPECT_EQ(task_dir_name(0), "task-000");
  EXPECT_EQ(task_dir_name(42), "task-042");
  EXPECT_EQ(task_dir_name(1234), "task-1234");
  EXPECT_EQ(parse_task_dir_name("task-042"), 42u);
  EXPECT_EQ(parse_task_dir_name(task_dir_name(1234)), 1234u);
  for (const char* other :
       {"task-", "task-x", "task--1", "task-1234567890", "tasks-001", "task-1 "}) {
    EXPECT_FALSE(parse_task_dir_name(other)) << other;
  }
  EXPECT_EQ(log_name("4711", false), "slurm-4711.out");
  EXPECT_EQ(log_name("5000_3", true), "slurm-5000_3.err");
  EXPECT_EQ(replaced_spec_name(2), "spec.toml.replaced-2");
  EXPECT_EQ(checkpoint_manifest("/runs/r", 200),
            "/runs/r/checkpoints/step-000000200/manifest.json");
}

}  // namespace
}  // namespace hpctrain::layout
