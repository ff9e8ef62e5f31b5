// The trainer's test hooks in one struct: knobs that tests and diagnostics set (the worker reads
// them from HPCTRAIN_* variables, worker/env_overrides.hpp's TestPlants) to drive paths a spec
// cannot reach on this machine, or to plant a bug on purpose. A real job sets none of them.
// Torch-free. Thread safety: a value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

namespace hpctrain::train {

struct TrainHooks {
  // Each rank appends "epoch step sample..." for every training batch to TRACE.rank-R, or
  // TRACE.TAG.rank-R with a step tag (HPCTRAIN_TRACE_SAMPLES); empty: off.
  std::filesystem::path trace_samples;
  // The GPU's input path, one-step-late agreement and fused optimizer on the CPU
  // (HPCTRAIN_GPU_PATH_ON_CPU=1; train/device_input.hpp).
  bool device_path_on_cpu = false;
  // On GPUs: CUDA's sync debug mode over each step's work before the agreement is read, 1 warn
  // or 2 error on anything that makes the host wait for the GPU (HPCTRAIN_CUDA_SYNC_DEBUG =
  // warn | error). 0: off.
  int cuda_sync_debug = 0;
  // The fp16 loss scale to start from (HPCTRAIN_FP16_INIT_SCALE; torch.amp's 65536 when unset).
  // A huge one forces overflowing, skipped steps.
  std::optional<double> fp16_init_scale;
  // fp16 autocast and loss scaling on the CPU (HPCTRAIN_FP16_ON_CPU=1), which a spec is otherwise
  // refused, and the scaler's growth interval (HPCTRAIN_FP16_GROWTH_INTERVAL; 2000), to drive the
  // scaler through overflow, backoff and growth in a short run.
  bool fp16_on_cpu = false;
  std::optional<int64_t> fp16_growth_interval;
  // Resume ablation (HPCTRAIN_RESUME_SKIP: piece names left out of a restore;
  // HPCTRAIN_RESUME_PIECES: the file rank 0 lists the restored pieces in;
  // train/checkpoint_content.hpp).
  std::set<std::string> resume_skip;
  std::filesystem::path resume_pieces_file;
  // A slow filesystem under the checkpoints: each file's fsync takes this many seconds longer
  // (HPCTRAIN_TEST_SLOW_FSYNC; checkpoint/slow_env.hpp). 0: the filesystem as it is.
  double slow_fsync_seconds = 0;
  // Corrupt samples: the loss of every step whose batch holds one of these training samples is
  // NaN (HPCTRAIN_TEST_POISON_SAMPLE), which the divergence guard then sees.
  std::vector<int64_t> poison_samples;
  // Silent data corruption: this rank's logits are off by 1e-3 in every step
  // (HPCTRAIN_TEST_FAULTY_RANK).
  std::optional<int64_t> faulty_rank;
  // A host read planted in the static step's body (HPCTRAIN_TEST_HOST_READ=1): its guard must
  // stop the run (train/host_reads.hpp).
  bool host_read_in_step = false;
  // The static step's eager twin on a GPU too, no capture (HPCTRAIN_TEST_STATIC_EAGER=1): what
  // the graphs' replay is compared with.
  bool static_step_eager = false;
};

}  // namespace hpctrain::train
