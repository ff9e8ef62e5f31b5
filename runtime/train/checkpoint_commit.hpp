// How the trainer's checkpoints are written and committed: the store's two-phase protocol
// (checkpoint/store.hpp) carried out by every rank together. Each rank writes and fsyncs its
// part; the ranks agree that every part was written; each node's leader merges its node's part
// manifests and the ranks agree that every merge succeeded; rank 0 commits (or, when a part or a
// node manifest is missing, abandons) the step; every rank learns the outcome. A save is written
// either at once (training waits for it) or in the background while training goes on: then the
// per-step agreement carries each rank's write state (train/agreement.hpp), and the commit happens
// at the first step boundary where every rank reports its write done, or when the trainer drains
// it. Both ways end in the one commit path (conclude()). Torch-free: the ranks are reached through
// CommitRanks (the trainer's communicator in checkpointing.cpp; threads of one process in tests),
// so the background write runs under ThreadSanitizer. Thread safety: the training thread; a
// background write runs on its own thread, which has the store to itself until its result is
// collected.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "checkpoint/store.hpp"
#include "common/time.hpp"

namespace hpctrain::train {

// What the commit asks of the ranks: this rank, their number, and a vote, a collective that
// returns true on every rank when every rank passed true.
struct CommitRanks {
  int rank = 0;
  int size = 1;
  std::function<bool(bool)> all;
};

class CheckpointCommit {
 public:
  // Makes this rank's files of the step being saved (on the writer thread when in background).
  using MakePart = std::function<checkpoint::Part()>;

  CheckpointCommit(std::unique_ptr<checkpoint::Store> store, CommitRanks ranks, std::ostream* out);
  ~CheckpointCommit();
  CheckpointCommit(const CheckpointCommit&) = delete;
  CheckpointCommit& operator=(const CheckpointCommit&) = delete;

  checkpoint::Store& store() { return *store_; }

  // Collective. Writes this rank's part of `step` (a save that `started` at that time, its
  // manifest `meta`) and commits it. Returns the seconds from `started` to the commit, or nullopt
  // when it was not committed (said on stderr).
  std::optional<double> write_now(int64_t step, const nlohmann::json& meta,
                                  Clock::time_point started, const MakePart& make_part);
  // Starts writing this rank's part of `step` in the background (a save in flight must have
  // been drained).
  void write_in_background(int64_t step, const nlohmann::json& meta, Clock::time_point started,
                           MakePart make_part);

  // This rank's slots of the step's agreement: whether the background write is pending, done or
  // failed.
  void contribute(float* slots);
  // After the agreement (gathered at step `gathered_at`): commits the background save once every
  // rank's write is done, or abandons it when one failed. An agreement gathered before that save
  // began says nothing about it and is ignored. Returns the save's seconds when it committed.
  std::optional<double> settle(const float* agreed, int64_t gathered_at);
  // Collective. Waits for a save in flight and commits it; returns its seconds when it committed.
  std::optional<double> drain();
  bool in_flight() const { return pending_ != nullptr; }

  // The newest step committed by this run (on rank 0; a restored one on every rank), or -1.
  int64_t last_committed() const { return last_committed_; }
  void restored(int64_t step) { last_committed_ = step; }

 private:
  struct Pending;
  // The one commit path: every rank reports its write, node leaders merge their nodes' parts and
  // report that, rank 0 commits or abandons, every rank learns the outcome. Returns the seconds
  // since the save started when it committed.
  std::optional<double> conclude(const Pending& pending);

  std::unique_ptr<checkpoint::Store> store_;
  CommitRanks ranks_;
  std::ostream* out_;
  std::unique_ptr<Pending> pending_;  // the save in flight (background)
  int64_t last_committed_ = -1;
};

}  // namespace hpctrain::train
