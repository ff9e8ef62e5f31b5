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
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "train/evaluate.hpp"
#include "train/hooks.hpp"
#include "train/replicas.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct TrainOptions {
  // Where metrics.jsonl, tensorboard/, checkpoints/ and model.pt go; empty: nothing is written.
  std::filesystem::path run_dir;
  std::ostream* out = nullptr;  // progress and the final line (rank 0); null: silent
  // SLURM_JOB_END_TIME: the run checkpoints and stops (as for a signal) before it.
  std::optional<int64_t> job_end_time;
  // Which srun step of the job this is (HPCTRAIN_STEP_TAG, "RESTART.STEP"): rank 0 writes a
  // "started" record with it to metrics.jsonl after the process's first training step, which is
  // how the step supervisor times a recovery. Empty: the record has no tag.
  std::string srun_step_tag;
  // The host of every rank (the process group's), for the straggler line; empty: not named.
  std::vector<std::string> hosts;
  TrainHooks hooks;  // tests only
};

struct TrainResult {
  bool stopped = false;           // a stop signal or the time limit: checkpointed, requeue me
  bool time_limit = false;        // stopped before the job's time limit (not by a signal)
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

TrainResult train(const spec::Spec& spec, dist::Communicator& comm, const TrainOptions& options);

}  // namespace hpctrain::train
