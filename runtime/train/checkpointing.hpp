// The trainer's checkpoint manager (docs/checkpoint-format.md): resuming from the newest
// checkpoint every rank can read, and saving as the policy says. It composes three parts, each
// with its own options from the spec:
//   - what a checkpoint holds and putting it back (train/checkpoint_content.hpp);
//   - when one is taken (train/save_policy.hpp: every_steps, every_minutes on rank 0's clock, a
//     stop, the job's time limit near, the end);
//   - how it is written and committed (train/checkpoint_commit.hpp: two-phase, at once or in the
//     background).
// Every decision is agreed through the trainer's per-step all-reduce (train/agreement.hpp), so
// all ranks save the same steps.
// Thread safety: the training thread only (the writer thread is internal).
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "checkpoint/store.hpp"
#include "dist/communicator.hpp"
#include "train/agreement.hpp"
#include "train/checkpoint_commit.hpp"
#include "train/checkpoint_content.hpp"
#include "train/hooks.hpp"
#include "train/save_policy.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct CheckpointOptions {
  // Checkpoints are taken (a run directory, and every_steps, every_minutes or preemption on:
  // preemption needs a checkpoint to requeue into).
  bool enabled = false;
  std::filesystem::path dir;  // RUN_DIR/checkpoints
  checkpoint::StoreOptions store;
  SavePolicyOptions policy;
  ContentOptions content;
  double slow_fsync_seconds = 0;  // TrainHooks::slow_fsync_seconds
  // Every rank's host (hosts[r] is rank r's), for the store's node layout: one node manifest per
  // host. Empty (or a host unknown): every rank its own node.
  std::vector<std::string> hosts;
};
// `run_dir` empty: no checkpoints. `job_end_time`: SLURM_JOB_END_TIME, the deadline's.
CheckpointOptions checkpoint_options_from_spec(const spec::Spec& spec,
                                               const std::filesystem::path& run_dir,
                                               std::optional<int64_t> job_end_time,
                                               const TrainHooks& hooks = {});

class Checkpointer {
 public:
  Checkpointer(const CheckpointOptions& options, dist::Communicator& comm, std::ostream* out);
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool enabled() const { return commit_ != nullptr; }

  // Collective. Restores the newest checkpoint not above step `at_most` that every rank can read
  // (a damaged one is reported and the previous one used) into `state`; nullopt when there is
  // none. Throws rt::Error when the spec changed in a way that breaks resume.
  std::optional<Resumed> restore(TrainingState& state,
                                 int64_t at_most = std::numeric_limits<int64_t>::max());

  // Fills this rank's slots of the agreement before the per-step all-reduce; `step_seconds` is
  // the last step's duration (for the deadline).
  void contribute(float* slots, double step_seconds);
  // After the all-reduce: commits or abandons the background save as the ranks agreed
  // (train/checkpoint_commit.hpp).
  void settle(const Agreed& agreed);
  // After step `step` (just completed) of `total_steps`: how to save it, when at all
  // (train/save_policy.hpp), given whether the run stops now and the agreement.
  SaveKind due(int64_t step, int64_t total_steps, bool stopping, const Agreed& agreed) const;

  // Collective. Saves `state` at `position` as `kind` says (waiting first for a save in flight).
  // False when a save written at once was not committed (every rank alike); a background save
  // is judged when it settles.
  bool save(TrainingState& state, const Position& position, bool finished, SaveKind kind);
  // Collective. Waits for a save in flight and commits it (before exiting or reporting).
  void drain();

  // The newest step committed by this run (rank 0's view), or -1.
  int64_t last_committed() const { return commit_ ? commit_->last_committed() : -1; }

 private:
  dist::Communicator& comm_;
  std::ostream* out_;
  CheckpointContent content_;
  SavePolicy policy_;
  std::unique_ptr<checkpoint::Env> slow_env_;  // null unless a test slows the filesystem
  std::unique_ptr<CheckpointCommit> commit_;   // null when checkpoints are off
};

}  // namespace hpctrain::train
