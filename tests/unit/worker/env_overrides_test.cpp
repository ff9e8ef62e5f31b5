// worker/env_overrides.hpp: every variable read into its field, empty as unset, and a bad value
// refused with the variable's name.
#include "worker/env_overrides.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"

namespace hpctrain::worker {
namespace {

// The EnvError's message for `env`, or "" when it parses.
std::string refusal(const dist::EnvMap& env) {
  try {
    read_env_overrides(env);
  } catch (const rt::EnvError& e) {
    return e.message();
  }
  return "";
}

TEST(EnvOverrides, NothingSetIsEveryDefault) {
  const EnvOverrides o = read_env_overrides({{"PATH", "/usr/bin"}});
  EXPECT_EQ(o.user.run_dir, "");
  EXPECT_EQ(o.user.srun_step_tag, "");
  EXPECT_FALSE(o.user.world_size.has_value());
  EXPECT_FALSE(o.user.torch_log_level);
  EXPECT_EQ(o.test.stall, "");
  EXPECT_EQ(o.test.trace_samples, "");
  EXPECT_FALSE(o.test.gpu_path_on_cpu);
  EXPECT_EQ(o.test.cuda_sync_debug, 0);
  EXPECT_FALSE(o.test.fp16_on_cpu);
  EXPECT_FALSE(o.test.fp16_init_scale.has_value());
  EXPECT_FALSE(o.test.fp16_growth_interval.has_value());
  EXPECT_TRUE(o.test.resume_skip.empty());
  EXPECT_EQ(o.test.resume_pieces_file, "");
  EXPECT_FALSE(o.test.slow_fsync_seconds.has_value());
  EXPECT_TRUE(o.test.poison_samples.empty());
  EXPECT_FALSE(o.test.faulty_rank.has_value());
}

TEST(EnvOverrides, UserSettingsAreRead) {
  const EnvOverrides o = read_env_overrides({{"HPCTRAIN_RUN_DIR", "/runs/a/task-003"},
                                             {"HPCTRAIN_STEP_TAG", "2.1"},
                                             {"HPCTRAIN_WORLD_SIZE", "12"},
                                             {"TORCH_CPP_LOG_LEVEL", "INFO"}});
  EXPECT_EQ(o.user.run_dir, "/runs/a/task-003");
  EXPECT_EQ(o.user.srun_step_tag, "2.1");
  EXPECT_EQ(o.user.world_size, 12);
  EXPECT_TRUE(o.user.torch_log_level);
  // TORCH_CPP_LOG_LEVEL is libtorch's: set at all, even empty, is the user's choice.
  EXPECT_TRUE(read_env_overrides({{"TORCH_CPP_LOG_LEVEL", ""}}).user.torch_log_level);
}

TEST(EnvOverrides, TestPlantsAreRead) {
  const EnvOverrides o = read_env_overrides({{"HPCTRAIN_TEST_STALL", "1:5:data:600"},
                                             {"HPCTRAIN_TRACE_SAMPLES", "/tmp/trace"},
                                             {"HPCTRAIN_GPU_PATH_ON_CPU", "1"},
                                             {"HPCTRAIN_CUDA_SYNC_DEBUG", "error"},
                                             {"HPCTRAIN_FP16_ON_CPU", "1"},
                                             {"HPCTRAIN_FP16_INIT_SCALE", "16777216"},
                                             {"HPCTRAIN_FP16_GROWTH_INTERVAL", "3"},
                                             {"HPCTRAIN_RESUME_SKIP", "rng.cpu,,scaler.scale"},
                                             {"HPCTRAIN_RESUME_PIECES", "/tmp/pieces"},
                                             {"HPCTRAIN_TEST_SLOW_FSYNC", "1.5"},
                                             {"HPCTRAIN_TEST_POISON_SAMPLE", "959"},
                                             {"HPCTRAIN_TEST_FAULTY_RANK", "1"}});
  EXPECT_EQ(o.test.stall, "1:5:data:600");
  EXPECT_EQ(o.test.trace_samples, "/tmp/trace");
  EXPECT_TRUE(o.test.gpu_path_on_cpu);
  EXPECT_EQ(o.test.cuda_sync_debug, 2);
  EXPECT_TRUE(o.test.fp16_on_cpu);
  EXPECT_EQ(o.test.fp16_init_scale, 16777216.0);
  EXPECT_EQ(o.test.fp16_growth_interval, 3);
  EXPECT_EQ(o.test.resume_skip, (std::set<std::string>{"rng.cpu", "scaler.scale"}));
  EXPECT_EQ(o.test.resume_pieces_file, "/tmp/pieces");
  EXPECT_EQ(o.test.slow_fsync_seconds, 1.5);
  EXPECT_EQ(o.test.poison_samples, (std::vector<int64_t>{959}));
  EXPECT_EQ(o.test.faulty_rank, 1);
  EXPECT_EQ(read_env_overrides({{"HPCTRAIN_TEST_POISON_SAMPLE", "0"}}).test.poison_samples,
            (std::vector<int64_t>{0}))
      << "sample 0 is a sample";
  EXPECT_EQ(read_env_overrides({{"HPCTRAIN_TEST_POISON_SAMPLE", "7,3,12"}}).test.poison_samples,
            (std::vector<int64_t>{7, 3, 12}));
  EXPECT_EQ(read_env_overrides({{"HPCTRAIN_CUDA_SYNC_DEBUG", "warn"}}).test.cuda_sync_debug, 1);
  EXPECT_EQ(read_env_overrides({{"HPCTRAIN_CUDA_SYNC_DEBUG", "off"}}).test.cuda_sync_debug, 0);
  EXPECT_FALSE(read_env_overrides({{"HPCTRAIN_GPU_PATH_ON_CPU", "0"}}).test.gpu_path_on_cpu);
  EXPECT_EQ(read_env_overrides({{"HPCTRAIN_FP16_INIT_SCALE", "0.5"}}).test.fp16_init_scale, 0.5);
}

TEST(EnvOverrides, EmptyIsUnset) {
  const EnvOverrides o = read_env_overrides({{"HPCTRAIN_WORLD_SIZE", ""},
                                             {"HPCTRAIN_CUDA_SYNC_DEBUG", ""},
                                             {"HPCTRAIN_FP16_ON_CPU", ""},
                                             {"HPCTRAIN_FP16_INIT_SCALE", ""},
                                             {"HPCTRAIN_RUN_DIR", ""}});
  EXPECT_FALSE(o.user.world_size.has_value());
  EXPECT_EQ(o.test.cuda_sync_debug, 0);
  EXPECT_FALSE(o.test.fp16_on_cpu);
  EXPECT_FALSE(o.test.fp16_init_scale.has_value());
  EXPECT_EQ(o.user.run_dir, "");
}

TEST(EnvOverrides, ABadValueIsRefusedByName) {
  EXPECT_EQ(refusal({{"HPCTRAIN_WORLD_SIZE", "four"}}),
            "HPCTRAIN_WORLD_SIZE='four' is not a positive integer");
  EXPECT_EQ(refusal({{"HPCTRAIN_WORLD_SIZE", "0"}}),
            "HPCTRAIN_WORLD_SIZE='0' is not a positive integer");
  EXPECT_EQ(refusal({{"HPCTRAIN_WORLD_SIZE", "-4"}}),
            "HPCTRAIN_WORLD_SIZE='-4' is not a positive integer");
  EXPECT_EQ(refusal({{"HPCTRAIN_WORLD_SIZE", "99999999999999999999"}}),
            "HPCTRAIN_WORLD_SIZE='99999999999999999999' is not a positive integer");
  EXPECT_EQ(refusal({{"HPCTRAIN_FP16_GROWTH_INTERVAL", "3x"}}),
            "HPCTRAIN_FP16_GROWTH_INTERVAL='3x' is not a positive integer");
  EXPECT_EQ(refusal({{"HPCTRAIN_FP16_INIT_SCALE", "-1"}}),
            "HPCTRAIN_FP16_INIT_SCALE='-1' is not a positive number");
  EXPECT_EQ(refusal({{"HPCTRAIN_FP16_INIT_SCALE", "inf"}}),
            "HPCTRAIN_FP16_INIT_SCALE='inf' is not a positive number");
  EXPECT_EQ(refusal({{"HPCTRAIN_FP16_INIT_SCALE", "nan"}}),
            "HPCTRAIN_FP16_INIT_SCALE='nan' is not a positive number");
  EXPECT_EQ(refusal({{"HPCTRAIN_TEST_SLOW_FSYNC", "0"}}),
            "HPCTRAIN_TEST_SLOW_FSYNC='0' is not a positive number");
  EXPECT_EQ(refusal({{"HPCTRAIN_TEST_POISON_SAMPLE", "-1"}}),
            "HPCTRAIN_TEST_POISON_SAMPLE='-1' is not an integer of 0 or more");
  EXPECT_EQ(refusal({{"HPCTRAIN_TEST_POISON_SAMPLE", "3,,4"}}),
            "HPCTRAIN_TEST_POISON_SAMPLE='3,,4' is not a comma-separated list of integers of 0 or "
            "more");
  EXPECT_EQ(refusal({{"HPCTRAIN_CUDA_SYNC_DEBUG", "on"}}),
            "HPCTRAIN_CUDA_SYNC_DEBUG must be warn, error or off, not 'on'");
  EXPECT_EQ(refusal({{"HPCTRAIN_GPU_PATH_ON_CPU", "yes"}}),
            "HPCTRAIN_GPU_PATH_ON_CPU='yes' is not 1 or 0");
  EXPECT_EQ(refusal({{"HPCTRAIN_FP16_ON_CPU", "true"}}),
            "HPCTRAIN_FP16_ON_CPU='true' is not 1 or 0");
  // A refusal is an EnvError (exit status 2 in the worker) whose text carries the place too.
  try {
    read_env_overrides({{"HPCTRAIN_WORLD_SIZE", "x"}});
    ADD_FAILURE() << "HPCTRAIN_WORLD_SIZE=x accepted";
  } catch (const rt::EnvError& e) {
    EXPECT_NE(std::string(e.what()).find("env_overrides.cpp:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpctrain::worker
