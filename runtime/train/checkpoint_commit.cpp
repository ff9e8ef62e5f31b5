#include "train/checkpoint_commit.hpp"

#include <future>
#include <iomanip>
#include <iostream>

#include "common/error.hpp"
#include "train/agreement.hpp"

namespace hpctrain::train {
namespace {

// This rank's part written: its failure a result, never an exception out of the writer thread.
checkpoint::WriteResult write_this_part(checkpoint::Store& store, int64_t step,
                                        const CheckpointCommit::MakePart& make_part) {
  try {
    return store.write_part(step, make_part());
  } catch (const std::exception& e) {
    checkpoint::WriteResult failed;
    failed.error = e.what();
    return failed;
  }
}

// This node's part manifests merged (on its leader): a failure a result, never an exception.
checkpoint::WriteResult merge_this_node(checkpoint::Store& store, int64_t step) {
  try {
    return store.merge_node(step);
  } catch (const std::exception& e) {
    checkpoint::WriteResult failed;
    failed.error = e.what();
    return failed;
  }
}

}  // namespace

struct CheckpointCommit::Pending {
  int64_t step = 0;
  nlohmann::json meta;
  Clock::time_point started;
  bool background = false;
  std::future<checkpoint::WriteResult> write;     // the background write
  std::optional<checkpoint::WriteResult> result;  // once written, or collected from `write`

  const checkpoint::WriteResult& wait() {
    if (!result) result = write.get();
    return *result;
  }
};

CheckpointCommit::CheckpointCommit(std::unique_ptr<checkpoint::Store> store, CommitRanks ranks,
                                   std::ostream* out)
    : store_(std::move(store)), ranks_(std::move(ranks)), out_(out) {}

CheckpointCommit::~CheckpointCommit() = default;

std::optional<double> CheckpointCommit::write_now(int64_t step, const nlohmann::json& meta,
                                                  Clock::time_point started,
                                                  const MakePart& make_part) {
  Pending p;
  p.step = step;
  p.meta = meta;
  p.started = started;
  p.result = write_this_part(*store_, step, make_part);
  return conclude(p);
}

void CheckpointCommit::write_in_background(int64_t step, const nlohmann::json& meta,
                                           Clock::time_point started, MakePart make_part) {
  if (pending_) HPCTRAIN_THROW(rt::Error, "a checkpoint save is still in flight");
  pending_ = std::make_unique<Pending>();
  pending_->step = step;
  pending_->meta = meta;
  pending_->started = started;
  pending_->background = true;
  pending_->write = std::async(std::launch::async, [this, step, make = std::move(make_part)] {
    return write_this_part(*store_, step, make);
  });
  if (ranks_.rank == 0 && out_) {
    *out_ << rt::rank_prefix() << "checkpoint step " << step
          << ": writing in the background (training stalled " << std::fixed << std::setprecision(3)
          << seconds_since(started) << " s)" << std::endl;
  }
}

void CheckpointCommit::contribute(float* slots) {
  if (!pending_) return;
  Pending& p = *pending_;
  if (!p.result && p.write.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    p.result = p.write.get();
  }
  if (!p.result) {
    slots[Agreement::kWritePending] += 1;
  } else if (p.result->ok) {
    slots[Agreement::kWriteDone] += 1;
  } else {
    slots[Agreement::kWriteFailed] += 1;
  }
}

std::optional<double> CheckpointCommit::settle(const float* agreed, int64_t gathered_at) {
  if (!pending_ || gathered_at < pending_->step) return std::nullopt;
  // Every rank acts alike: the agreement is the same everywhere.
  if (agreed[Agreement::kWriteFailed] == 0 && agreed[Agreement::kWriteDone] < ranks_.size) {
    return std::nullopt;  // still writing somewhere
  }
  return drain();
}

std::optional<double> CheckpointCommit::drain() {
  if (!pending_) return std::nullopt;
  const std::unique_ptr<Pending> p = std::move(pending_);
  p->wait();
  return conclude(*p);
}

std::optional<double> CheckpointCommit::conclude(const Pending& p) {
  const checkpoint::WriteResult& result = *p.result;
  if (!result.ok) {
    std::cerr << rt::rank_prefix() << "checkpoint step " << p.step
              << ": writing this rank's part failed: " << result.error << std::endl;
  }
  const bool all_written = ranks_.all(result.ok);
  // Every node's leader merges its node's part manifests, so that rank 0 reads one manifest per
  // node, not one per rank. Every rank takes this branch alike (the vote is the same
  // everywhere), so the collectives stay matched.
  bool all_merged = false;
  if (all_written) {
    const checkpoint::WriteResult merged = merge_this_node(*store_, p.step);
    if (!merged.ok) {
      std::cerr << rt::rank_prefix() << "checkpoint step " << p.step
                << ": merging this node's part manifests failed: " << merged.error << std::endl;
    }
    all_merged = ranks_.all(merged.ok);
  }
  bool committed = false;
  std::string problem = all_written
                            ? "a node leader could not merge its node's parts (see its error line)"
                            : "a rank could not write its part (see its error line)";
  if (ranks_.rank == 0) {
    if (all_written && all_merged) {
      try {
        store_->commit(p.step, p.meta);
        committed = true;
      } catch (const rt::Error& e) {
        problem = e.message();
      }
    } else {
      store_->abandon(p.step);
    }
  }
  // Every rank learns the outcome, so all of them report and decide alike.
  committed = ranks_.all(ranks_.rank == 0 ? committed : true);
  if (!committed) {
    if (ranks_.rank == 0) {
      std::cerr << rt::rank_prefix() << "checkpoint step " << p.step
                << " NOT committed: " << problem << std::endl;
    }
    return std::nullopt;
  }
  last_committed_ = p.step;
  const double seconds = seconds_since(p.started);
  if (ranks_.rank == 0 && out_) {
    *out_ << rt::rank_prefix() << "checkpoint step " << p.step << " committed (" << std::fixed
          << std::setprecision(p.background ? 1 : 3) << seconds
          << (p.background ? " s, in the background)" : " s, training stalled as long)")
          << std::endl;
  }
  return seconds;
}

}  // namespace hpctrain::train
