// What a trainer's checkpoint holds (docs/checkpoint-format.md), and putting it back.
//
// step-N/: model.pt (parameters and rank 0's buffers, torch.load-able), optimizer.pt
// (per-parameter state, named as PyTorch's optimizer state), trainer.json (step, epoch, the
// global data position, the loss scaler, and what resume must find unchanged: architecture,
// classes, optimizer, dataset), and rng-rank-R.pt per rank (its CPU and CUDA generator states).
// Local SGD adds local_sgd.pt (rank 0: LocalSgd::state()) and local-rank-R.pt for every rank but
// 0 ("model.<key>" and "optimizer.<key>": its own model and optimizer state, which differ between
// averagings; rank 0's are model.pt and optimizer.pt). Resumed at the same world size each rank
// takes its own back; at another (reshard), every rank starts from the mean of the saving ranks'.
// The data pipeline needs no state of its own: every random choice is a function of (seed,
// epoch, sample index), and the position is the global count of samples consumed.
//
// When a checkpoint is taken is train/save_policy.hpp's; how it is written and committed,
// train/checkpoint_commit.hpp's.
// Thread safety: the training thread; serialise() may run on the writer thread on a snapshot
// taken with copies.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/store.hpp"
#include "data/format.hpp"
#include "dist/communicator.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"
#include "train/grad_scaler.hpp"
#include "train/hooks.hpp"
#include "train/local_sgd.hpp"
#include "train/optimizer.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

// Where training stands at a step boundary.
struct Position {
  int64_t step = 0;       // optimizer steps completed
  int64_t epoch = 0;      // the epoch being read (0-based)
  int64_t consumed = 0;   // samples of that epoch's order consumed by all ranks together
  int64_t rollbacks = 0;  // times the divergence guard rolled the run back before this step
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

struct ContentOptions {
  int64_t batch_size = 0;  // per rank, recorded in trainer.json
  bool local_sgd = false;  // train.sync = "local_sgd": the local files too
  // What a resumed run must not change, from the spec (the training set's figures are added):
  // written into trainer.json, compared on restore.
  nlohmann::json resume_key;
  // Tests (tests/integration/resume_ablation.sh): restore() names every piece of state it puts
  // back ("model.parameters", "model.buffers", "optimizer.<kind>", "scaler.scale",
  // "scaler.growth_tracker", "rng.<generator>", "position.step|epoch|consumed", "local.*",
  // "local_sgd.*"), rank 0 writes the names to `pieces_file` (one per line), and leaves the pieces
  // in `skip` as they were: the bug each test must catch, planted on purpose.
  std::set<std::string> ablate_skip;
  std::filesystem::path ablate_pieces_file;
};
ContentOptions content_options_from_spec(const spec::Spec& spec, const TrainHooks& hooks = {});

// Where a checkpoint put training back.
struct Resumed {
  Position position;
  bool finished = false;   // a restarted run that ended already
  int64_t world_size = 0;  // the checkpoint's
};

// The state of one save, taken at a step boundary.
struct Snapshot {
  std::vector<std::pair<std::string, at::Tensor>> model, optimizer, rng;
  // Local SGD: this rank's model and optimizer state (ranks but 0), rank 0's LocalSgd state.
  std::vector<std::pair<std::string, at::Tensor>> local, local_sgd;
  std::string trainer_json;
  nlohmann::json meta;  // the manifest's: step, epoch, consumed, finished, world_size, ...
};

class CheckpointContent {
 public:
  CheckpointContent(ContentOptions options, dist::Communicator& comm, std::ostream* out);

  // This rank's state at `position`. With `copy` the tensors are copied to host memory (the save
  // continues in the background while training changes them); the copies go into buffers kept
  // from the last save.
  Snapshot capture(TrainingState& state, const Position& position, bool finished, bool copy);
  // The files of this rank's part (torch.save bytes), from a snapshot.
  checkpoint::Part serialise(const Snapshot& snap) const;

  // The files every rank reads from rank 0's part.
  std::vector<std::string> shared_files() const;
  // The files this rank needs besides the shared ones from checkpoint `loaded` (local SGD's).
  std::vector<std::string> own_files(const checkpoint::Loaded& loaded) const;
  // Throws rt::Error naming what differs when `loaded` (in `dir`) was saved by a run this one
  // cannot continue (another model, dataset, optimizer or train.sync).
  void check_resume_key(const checkpoint::Loaded& loaded, const TrainingState& state,
                        const std::string& dir) const;
  // Puts `loaded` back into `state` (every file of shared_files() and own_files() present).
  Resumed restore(TrainingState& state, const checkpoint::Loaded& loaded);

 private:
  // Local SGD's part of restore(): this rank's own model and optimizer state (or, at another
  // world size, the mean of every saving rank's) into `weights` and `opt`, and LocalSgd's state.
  void restore_local(TrainingState& state, const checkpoint::Loaded& loaded,
                     model::StateDict& weights, model::StateDict& opt,
                     const std::function<bool(const std::string&)>& restoring);
  // The resume key of this run on `dataset`.
  nlohmann::json resume_key(const data::DatasetInfo& dataset) const;

  ContentOptions options_;
  dist::Communicator& comm_;
  std::ostream* out_;
  std::map<std::string, at::Tensor> snapshot_buffers_;  // reused host copies (async saves)
};

}  // namespace hpctrain::train
