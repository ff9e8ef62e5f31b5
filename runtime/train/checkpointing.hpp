// The trainer's checkpoints (docs/checkpoint-format.md): what one holds, when one is taken, and
// resuming from the newest one every rank can read.
//
// Contents of step-N/: model.pt (parameters and rank 0's buffers, torch.load-able), optimizer.pt
// (per-parameter state, named as PyTorch's optimizer state), trainer.json (step, epoch, the
// global data position, the loss scaler, and what resume must find unchanged: architecture,
// classes, optimizer, dataset), and rng-rank-R.pt per rank (its CPU and CUDA generator states).
// Local SGD adds local_sgd.pt (rank 0: LocalSgd::state()) and local-rank-R.pt for every rank but
// 0 ("model.<key>" and "optimizer.<key>": its own model and optimizer state, which differ between
// averagings; rank 0's are model.pt and optimizer.pt). Resumed at the same world size each rank
// takes its own back; at another, every rank starts from the mean of the saving ranks'.
// The data pipeline needs no state of its own: every random choice is a function of (seed,
// epoch, sample index), and the position is the global count of samples consumed.
//
// When: every checkpoint.every_steps steps, every checkpoint.every_minutes (rank 0's clock), at the
// end (marked finished, so a restarted finished run exits at once), when a stop signal arrives,
// and before the job's time limit (SLURM_JOB_END_TIME less the measured save time and a margin).
// Every decision is agreed through the trainer's per-step all-reduce, so all ranks save the same
// steps. Saving is two-phase (checkpoint/store.hpp): every rank writes and fsyncs its part, the
// ranks agree all succeeded, then rank 0 commits; with checkpoint.async the writing runs in the
// background while training goes on, and the commit happens at the first step boundary where
// every rank reports its write done.
// Thread safety: the training thread only (the store's writer thread is internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "checkpoint/store.hpp"
#include "data/format.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"
#include "train/agreement.hpp"  // the slots the checkpointer reads and fills
#include "train/grad_scaler.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

// Where training stands at a step boundary.
struct Position {
  int64_t step = 0;      // optimizer steps completed
  int64_t epoch = 0;     // the epoch being read (0-based)
  int64_t consumed = 0;  // samples of that epoch's order consumed by all ranks together
};

// What the trainer hands to the checkpointer to save or restore.
struct TrainingState {
  model::Classifier& model;
  torch::optim::Optimizer& optimizer;
  const NamedParams& params;
  GradScaler* scaler;                // null unless fp16
  const data::DatasetInfo& dataset;  // the training set's
  LocalSgd* local_sgd = nullptr;     // train.sync = "local_sgd": its state, and every rank's own
};

class Checkpointer {
 public:
  Checkpointer(const spec::Spec& spec, const std::filesystem::path& run_dir,
               dist::Communicator& comm, std::optional<int64_t> job_end_time, std::ostream* out);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  bool enabled() const { return enabled_; }

  // Collective. Restores the newest checkpoint that every rank can read (a damaged one is
  // reported and the previous one used) into `state`; nullopt when there is none. Throws
  // rt::Error when the spec changed in a way that breaks resume. `finished` tells a restarted
  // run that ended already.
  struct Resumed {
    Position position;
    bool finished = false;
    int64_t world_size = 0;  // the checkpoint's
  };
  std::optional<Resumed> restore(TrainingState& state);

  // Fills this rank's slots of the agreement before the per-step all-reduce; `step_seconds` is
  // the last step's duration (for the deadline).
  void contribute(float* slots, double step_seconds);
  // After the all-reduce: commits or abandons the background save as the ranks agreed.
  // `gathered_at`: the step whose contribute() filled the agreement (the step counter before it
  // completed). The device path reads an agreement one step late: one gathered before the save
  // in flight began says nothing about it and is ignored.
  void settle(const float* agreed, int64_t gathered_at);
  // Whether step `step` (just completed) is due for a checkpoint (every_steps), given the
  // agreement gathered at `gathered_at` (a request to save made before the last save began is
  // spent).
  bool due(int64_t step, const float* agreed, int64_t gathered_at) const;

  // Collective. Saves `position`: synchronously, or, with checkpoint.async and `allow_async`,
  // snapshots to memory and writes in the background (waiting first for a save in flight).
  void save(TrainingState& state, const Position& position, bool finished, bool allow_async);
  // Collective. Waits for a save in flight and commits it (before exiting or reporting).
  void drain();

  // The newest step committed by this run (rank 0's view), or -1.
  int64_t last_committed() const { return last_committed_; }

  // Tests (tests/integration/resume_ablation.sh): restore() names every piece of state it puts
  // back ("model.parameters", "model.buffers", "optimizer.<kind>", "scaler.scale",
  // "scaler.growth_tracker", "rng.<generator>", "position.step|epoch|consumed"), rank 0 writes
  // the names to `pieces_file` (one per line), and leaves the pieces in `skip` as they were:
  // the bug each test must catch, planted on purpose.
  void set_restore_ablation(std::set<std::string> skip, std::filesystem::path pieces_file) {
    ablate_skip_ = std::move(skip);
    ablate_pieces_file_ = std::move(pieces_file);
  }

 private:
  struct InFlight;
  // The state of one save, taken at the step boundary.
  struct Snapshot {
    std::vector<std::pair<std::string, at::Tensor>> model, optimizer, rng;
    // Local SGD: this rank's model and optimizer state (ranks but 0), rank 0's LocalSgd state.
    std::vector<std::pair<std::string, at::Tensor>> local, local_sgd;
    std::string trainer_json;
    nlohmann::json meta;
  };
  Snapshot capture(TrainingState& state, const Position& position, bool finished, bool copy);
  // The files of this rank's part (torch.save bytes), from a snapshot.
  checkpoint::Part serialise(const Snapshot& snap) const;
  void commit_agreed(int64_t step, const nlohmann::json& meta, bool all_ok);
  bool all_ranks(bool ok);
  // Throws rt::Error naming what differs when `loaded` was saved by a run this spec cannot
  // continue (another model, dataset, optimizer or train.sync).
  void check_resume_key(const checkpoint::Loaded& loaded, const TrainingState& state) const;
  // Local SGD's part of restore(): this rank's own model and optimizer state (or, at another
  // world size, the mean of every saving rank's) into `weights` and `opt`, and LocalSgd's state.
  void restore_local(TrainingState& state, const checkpoint::Loaded& loaded,
                     model::StateDict& weights, model::StateDict& opt,
                     const std::function<bool(const std::string&)>& restoring);
  // Every rank's `value`, by rank.
  at::Tensor gather(int64_t value);

  const spec::Spec& spec_;
  dist::Communicator& comm_;
  std::optional<int64_t> job_end_time_;
  std::ostream* out_;
  bool enabled_ = false;
  std::unique_ptr<checkpoint::Store> store_;
  std::map<std::string, at::Tensor> snapshot_buffers_;  // reused host copies (async saves)
  std::unique_ptr<InFlight> in_flight_;
  int64_t last_committed_ = -1;
  int64_t last_save_step_ = -1;  // the step of the newest save begun
  std::set<std::string> ablate_skip_;
  std::filesystem::path ablate_pieces_file_;
  double last_save_seconds_ = 0;
  std::chrono::steady_clock::time_point last_save_time_;
};

}  // namespace hpctrain::train
