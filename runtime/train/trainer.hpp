// The training loop of one rank: builds the model, optimizer, schedule, loss scaler and loaders
// from the spec, trains data-parallel over the communicator (gradients averaged by GradSync),
// evaluates on the validation set every eval_every_epochs and at the end, and reports progress
// (rank 0: a line every log_every_steps on `out`, RUN_DIR/metrics.jsonl and the same scalars in
// RUN_DIR/tensorboard/).
// Thread safety: call from the main thread; every rank calls it (it issues collectives).
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "dist/communicator.hpp"
#include "train/evaluate.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct TrainOptions {
  // Where metrics.jsonl, tensorboard/ and model.pt go (rank 0); empty: nothing is written.
  std::filesystem::path run_dir;
  std::ostream* out = nullptr;  // progress and the final line (rank 0); null: silent
  // SLURM_JOB_END_TIME: the run checkpoints and stops (as for a signal) before it.
  std::optional<int64_t> job_end_time;
  // Diagnostics: each rank appends "epoch step sample..." for every training batch to
  // TRACE.rank-R, or TRACE.TAG.rank-R with a step tag (HPCTRAIN_TRACE_SAMPLES in the worker);
  // empty: off.
  std::filesystem::path trace_samples;
  // Which srun step of the job attempt this is (HPCTRAIN_STEP_TAG): rank 0 writes a "started"
  // record with it to metrics.jsonl after the process's first step, which is how the step
  // supervisor times a recovery. Empty: the record has no tag.
  std::string step_tag;
  // The host of every rank (the process group's), for the straggler line; empty: not named.
  std::vector<std::string> hosts;
  // Tests: the GPU's input path, one-step-late agreement and fused optimizer on the CPU
  // (HPCTRAIN_GPU_PATH_ON_CPU=1 in the worker; train/device_input.hpp).
  bool device_path_on_cpu = false;
  // Tests on GPUs: CUDA's sync debug mode over each step's work before the agreement is read,
  // 1 warn or 2 error on anything that makes the host wait for the GPU (HPCTRAIN_CUDA_SYNC_DEBUG
  // = warn | error). 0: off.
  int cuda_sync_debug = 0;
  // Tests: the fp16 loss scale to start from (HPCTRAIN_FP16_INIT_SCALE; torch.amp's 65536 when
  // unset). A huge one forces overflowing, skipped steps.
  std::optional<double> fp16_init_scale;
  // Tests: fp16 autocast and loss scaling on the CPU (HPCTRAIN_FP16_ON_CPU=1), which a spec is
  // otherwise refused, and the scaler's growth interval (HPCTRAIN_FP16_GROWTH_INTERVAL; 2000),
  // to drive the scaler through overflow, backoff and growth in a short run.
  bool fp16_on_cpu = false;
  std::optional<int64_t> fp16_growth_interval;
  // Tests: Checkpointer::set_restore_ablation (HPCTRAIN_RESUME_SKIP, comma-separated piece
  // names; HPCTRAIN_RESUME_PIECES, the file rank 0 lists the restored pieces in).
  std::set<std::string> resume_skip;
  std::filesystem::path resume_pieces_file;
};

struct TrainResult {
  bool stopped = false;           // a stop signal or the time limit: checkpointed, requeue me
  bool already_finished = false;  // a restart of a finished run: nothing was done
  // The run's step counter at the end and when this attempt (this process) started: the attempt
  // took steps first_step + 1 .. steps (skipped fp16 steps included).
  int64_t steps = 0;
  int64_t first_step = 0;
  bool resumed = false;            // this attempt continued from a checkpoint
  int64_t epochs = 0;              // epochs the run has begun, this attempt's and earlier ones
  double train_seconds = 0;        // this attempt's training loop without its evaluations
  double images_per_s = 0;         // this attempt's steps, all ranks together, over train_seconds
  std::optional<EvalResult> eval;  // the final evaluation, when there is a validation set
  std::filesystem::path weights;   // model.pt (rank 0), when written
  uint64_t fingerprint = 0;        // weights_fingerprint() of the final model, equal on all ranks
  double peak_rss_mib = 0;         // the largest peak resident memory of any rank
  // Stopped (and checkpointed) to let this node go as a straggler (resilience.evict_stragglers).
  std::string evicted;
};

// FNV-1a over the bytes of every parameter and buffer in state-dict order: equal fingerprints
// mean bitwise equal weights.
uint64_t weights_fingerprint(const torch::nn::Module& model);

TrainResult train(const spec::Spec& spec, dist::Communicator& comm, const TrainOptions& options);

}  // namespace hpctrain::train
