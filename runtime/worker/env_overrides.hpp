// Every environment variable the worker reads besides the launcher's (SLURM_*, RANK, MASTER_*:
// dist/world.hpp), read once at start into one struct, in two kinds kept apart:
//   - user settings: set by the batch script (sbatch/job.sbatch.in) and the step supervisor
//     (`hpctrain supervise`) or by a user starting the worker by hand, part of how a job runs;
//   - test plants: knobs for tests and diagnostics that change what a run does (a stall, pieces
//     of state left out on resume, fp16 on the CPU); never set by the script or the supervisor.
// docs/runtime.md ("Environment") lists them. An empty value counts as unset. A bad value is an
// rt::EnvError naming the variable (exit status 2), before the rank joins.
// Torch-free. Thread safety: read_env_overrides() is a pure function of its map.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dist/world.hpp"

namespace hpctrain::worker {

struct UserSettings {
  // HPCTRAIN_RUN_DIR: the run directory (a job array task's own); empty: the spec's job.run_dir.
  std::string run_dir;
  // HPCTRAIN_STEP_TAG: which srun step of the job attempt this is ("RESTART.STEP"), for the
  // "started" record and the hang record in metrics.jsonl.
  std::string srun_step_tag;
  // HPCTRAIN_WORLD_SIZE: the ranks of this step after the step supervisor shrank the world around
  // a lost node (resilience.on_node_loss = "shrink"); unset: the spec's nodes x tasks_per_node.
  std::optional<int64_t> world_size;
  // TORCH_CPP_LOG_LEVEL is set: libtorch logs at the user's level; otherwise errors only.
  bool torch_log_level = false;
};

struct TestPlants {
  // HPCTRAIN_TEST_STALL: RANK:STEP:PHASE:SECONDS or @HOST:...: a stall planted in training
  // (dist/progress.hpp parses and plants it once the rank is known).
  std::string stall;
  // HPCTRAIN_TRACE_SAMPLES=PATH: each rank appends every batch's epoch, step and samples to
  // PATH.rank-R, PATH.TAG.rank-R with a step tag (train::TrainHooks::trace_samples); empty: off.
  std::string trace_samples;
  // HPCTRAIN_GPU_PATH_ON_CPU=1: the GPU's input path and fused optimizer on the CPU.
  bool gpu_path_on_cpu = false;
  // HPCTRAIN_CUDA_SYNC_DEBUG=warn|error|off: CUDA's sync debug mode, 1 warn, 2 error, 0 off.
  int cuda_sync_debug = 0;
  // HPCTRAIN_FP16_ON_CPU=1: fp16 autocast and loss scaling on the CPU, which a spec is otherwise
  // refused (spec::LoadOptions::allow_fp16_on_cpu).
  bool fp16_on_cpu = false;
  // HPCTRAIN_FP16_INIT_SCALE: the fp16 loss scale to start from, a positive number.
  std::optional<double> fp16_init_scale;
  // HPCTRAIN_FP16_GROWTH_INTERVAL: the loss scaler's growth interval, a positive integer.
  std::optional<int64_t> fp16_growth_interval;
  // HPCTRAIN_RESUME_SKIP=piece,...: pieces of state a resume leaves out (a bug planted on purpose).
  std::set<std::string> resume_skip;
  // HPCTRAIN_RESUME_PIECES=FILE: rank 0 lists the pieces of state it restored there.
  std::string resume_pieces_file;
  // HPCTRAIN_TEST_SLOW_FSYNC=SECONDS: each checkpoint file's fsync takes that much longer (a slow
  // filesystem, checkpoint/slow_env.hpp).
  std::optional<double> slow_fsync_seconds;
  // HPCTRAIN_TEST_POISON_SAMPLE=INDEX[,INDEX...]: the loss of every step whose batch holds one
  // of these training samples is NaN (corrupt samples that make the loss diverge; several read
  // in a row make the fp16 scaler skip a streak of steps).
  std::vector<int64_t> poison_samples;
  // HPCTRAIN_TEST_FAULTY_RANK=RANK: that rank computes wrong results (its logits off by 1e-3), as
  // hardware with silent data corruption would.
  std::optional<int64_t> faulty_rank;
  // HPCTRAIN_TEST_HOST_READ=1: the static step (train.cuda_graphs) reads its loss on the host
  // inside its body, which its host-read guard must refuse.
  bool host_read_in_step = false;
  // HPCTRAIN_TEST_STATIC_EAGER=1: on a GPU the static step runs its eager twin (no capture), to
  // compare the graphs' replay with.
  bool static_step_eager = false;
};

struct EnvOverrides {
  UserSettings user;
  TestPlants test;
};

// Reads the variables above from `env` (dist::current_environment() in the worker). Throws
// rt::EnvError naming the variable and its value when one does not parse.
EnvOverrides read_env_overrides(const dist::EnvMap& env);

}  // namespace hpctrain::worker
