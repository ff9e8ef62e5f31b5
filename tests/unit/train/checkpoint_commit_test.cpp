// How the trainer's checkpoints are committed (train/checkpoint_commit.hpp), ranks as threads of
// one process voting through tests/support/thread_group.hpp: a save written at once and one
// written in the background end in the same commit path, which commits only what every rank
// wrote and tells every rank the outcome. Node leaders merge their nodes' parts between the
// agreement and the commit; a merge that fails commits nothing. Also run under ThreadSanitizer.
#include "train/checkpoint_commit.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/env.hpp"
#include "common/error.hpp"
#include "support/temp_dir.hpp"
#include "support/thread_group.hpp"
#include "train/agreement.hpp"

namespace hpctrain::train {
namespace {

using test::TempDir;
using test::ThreadGroup;

// Rank `rank` of `group`, agreeing through the group.
CommitRanks ranks_in(int rank, ThreadGroup& group) {
  CommitRanks ranks;
  ranks.rank = rank;
  ranks.size = group.size();
  ranks.all = [&group](bool ok) { return group.all(ok); };
  return ranks;
}

checkpoint::StoreOptions keep_ten() {
  checkpoint::StoreOptions o;
  o.keep_last = 10;
  return o;
}

std::unique_ptr<CheckpointCommit> commit_in(const TempDir& dir, int rank, ThreadGroup& group,
                                            std::ostream* out) {
  return std::make_unique<CheckpointCommit>(
      std::make_unique<checkpoint::Store>(dir.file("checkpoints"), keep_ten(), rank, group.size()),
      ranks_in(rank, group), out);
}

// The POSIX Env, but creating a node manifest whose name contains `fail` fails, as a full disk
// would on that node.
class FailNodeManifestEnv final : public checkpoint::Env {
 public:
  explicit FailNodeManifestEnv(std::string fail) : fail_(std::move(fail)) {}
  bool create_dir(const std::string& p, uint32_t mode) override {
    return base_.create_dir(p, mode);
  }
  std::unique_ptr<checkpoint::WritableFile> new_file(const std::string& p, uint32_t mode) override {
    if (p.find(fail_) != std::string::npos) {
      HPCTRAIN_THROW(rt::Error, "create " + p + ": No space left on device");
    }
    return base_.new_file(p, mode);
  }
  void sync_dir(const std::string& p) override { base_.sync_dir(p); }
  void rename(const std::string& from, const std::string& to) override { base_.rename(from, to); }
  std::string read_file(const std::string& p, int64_t max) override {
    return base_.read_file(p, max);
  }
  std::vector<std::string> list_dir(const std::string& p) override { return base_.list_dir(p); }
  void remove_file(const std::string& p) override { base_.remove_file(p); }
  void remove_all(const std::string& p) override { base_.remove_all(p); }
  std::optional<checkpoint::FileStat> stat(const std::string& p, bool follow) override {
    return base_.stat(p, follow);
  }
  int64_t fs_type(const std::string& p) override { return base_.fs_type(p); }

 private:
  std::string fail_;
  checkpoint::Env& base_ = checkpoint::default_env();
};

// Ranks 0 and 2 on one node, 1 and 3 on another, over `env`.
std::unique_ptr<CheckpointCommit> two_node_commit(const TempDir& dir, int rank, ThreadGroup& group,
                                                  checkpoint::Env& env) {
  static const auto layout = checkpoint::NodeLayout::from_hosts({"n0", "n1", "n0", "n1"});
  return std::make_unique<CheckpointCommit>(
      std::make_unique<checkpoint::Store>(dir.file("checkpoints"), keep_ten(), rank, layout, env),
      ranks_in(rank, group), nullptr);
}

// This rank's part: one file of its own.
CheckpointCommit::MakePart part_of(int rank, bool fail = false) {
  return [rank, fail] {
    if (fail) throw std::runtime_error("disk on fire");
    checkpoint::Part p;
    p.files["part-" + std::to_string(rank) + ".bin"] = std::string(64, 'x');
    return p;
  };
}

std::vector<int64_t> committed(const TempDir& dir) {
  checkpoint::StoreOptions o;
  o.keep_last = 10;
  return checkpoint::Store(dir.file("checkpoints"), o, 0, 1).committed_steps();
}

TEST(CheckpointCommit, AWriteAtOnceCommitsWhenEveryRankWrote) {
  const TempDir dir;
  std::vector<int64_t> last(2);
  // One element per rank, written by its thread: not vector<bool>, whose elements share bytes.
  std::vector<char> timed(2);
  std::ostringstream log;
  test::on_thread_ranks(2, [&](int rank, ThreadGroup& group) {
    auto commit = commit_in(dir, rank, group, rank == 0 ? &log : nullptr);
    const auto seconds = commit->write_now(5, {{"step", 5}}, Clock::now(), part_of(rank));
    last[static_cast<size_t>(rank)] = commit->last_committed();
    timed[static_cast<size_t>(rank)] = seconds.has_value();
  });
  EXPECT_EQ(committed(dir), (std::vector<int64_t>{5}));
  EXPECT_EQ(last, (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(timed, (std::vector<char>{1, 1}));
  EXPECT_NE(log.str().find("checkpoint step 5 committed ("), std::string::npos) << log.str();
  EXPECT_NE(log.str().find(" s, training stalled as long)"), std::string::npos) << log.str();
}

TEST(CheckpointCommit, ARankThatCouldNotWriteLeavesTheStepUncommittedEverywhere) {
  const TempDir dir;
  std::vector<int64_t> last(3);
  std::vector<char> timed(3, 1);
  test::on_thread_ranks(3, [&](int rank, ThreadGroup& group) {
    auto commit = commit_in(dir, rank, group, nullptr);
    ASSERT_TRUE(commit->write_now(4, nlohmann::json::object(), Clock::now(), part_of(rank)));
    // Rank 2's part of step 8 fails: nothing of step 8 is committed, on any rank's word.
    const auto seconds =
        commit->write_now(8, nlohmann::json::object(), Clock::now(), part_of(rank, rank == 2));
    last[static_cast<size_t>(rank)] = commit->last_committed();
    timed[static_cast<size_t>(rank)] = seconds.has_value();
  });
  EXPECT_EQ(committed(dir), (std::vector<int64_t>{4}));
  EXPECT_EQ(last, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(timed, (std::vector<char>{0, 0, 0}));
}

TEST(CheckpointCommit, NodeLeadersMergeAndALeaderThatCannotCommitsNothing) {
  const TempDir dir;
  FailNodeManifestEnv env(".step-000000009.tmp/.node-1.json");  // node 1's leader, at step 9
  std::vector<int64_t> last(4);
  test::on_thread_ranks(4, [&](int rank, ThreadGroup& group) {
    auto commit = two_node_commit(dir, rank, group, env);
    ASSERT_TRUE(commit->write_now(5, nlohmann::json::object(), Clock::now(), part_of(rank)));
    EXPECT_FALSE(commit->write_now(9, nlohmann::json::object(), Clock::now(), part_of(rank)));
    last[static_cast<size_t>(rank)] = commit->last_committed();
  });
  EXPECT_EQ(committed(dir), (std::vector<int64_t>{5}));
  EXPECT_EQ(last, (std::vector<int64_t>{5, 5, 5, 5}));
  // Step 5 has one node manifest per node; step 9 left nothing behind.
  const std::string step5 = dir.file("checkpoints/step-000000005");
  EXPECT_TRUE(std::filesystem::exists(step5 + "/.node-0.json"));
  EXPECT_TRUE(std::filesystem::exists(step5 + "/.node-1.json"));
  EXPECT_FALSE(std::filesystem::exists(step5 + "/.node-2.json"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("checkpoints/.step-000000009.tmp")));
}

TEST(CheckpointCommit, ABackgroundSaveCommitsOnlyOnceTheAgreementSaysAllAreDone) {
  const TempDir dir;
  std::atomic<bool> release{false};
  std::vector<int64_t> before(2), after(2);
  test::on_thread_ranks(2, [&](int rank, ThreadGroup& group) {
    auto commit = commit_in(dir, rank, group, nullptr);
    // Rank 1's write waits until the test releases it.
    auto make = [&, rank] {
      while (rank == 1 && !release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return part_of(rank)();
    };
    commit->write_in_background(6, nlohmann::json::object(), Clock::now(), make);
    // An agreement where rank 1 is still writing: nothing happens.
    float pending[Agreement::kSize] = {};
    pending[Agreement::kWriteDone] = 1;
    pending[Agreement::kWritePending] = 1;
    EXPECT_FALSE(commit->settle(pending, /*gathered_at=*/6));
    // One gathered before the save began says nothing about it.
    float stale[Agreement::kSize] = {};
    stale[Agreement::kWriteDone] = 2;
    EXPECT_FALSE(commit->settle(stale, /*gathered_at=*/5));
    EXPECT_TRUE(commit->in_flight());
    before[static_cast<size_t>(rank)] = commit->last_committed();
    release = true;
    float done[Agreement::kSize] = {};
    done[Agreement::kWriteDone] = 2;
    EXPECT_TRUE(commit->settle(done, /*gathered_at=*/6));
    EXPECT_FALSE(commit->in_flight());
    after[static_cast<size_t>(rank)] = commit->last_committed();
  });
  EXPECT_EQ(before, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(after, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(committed(dir), (std::vector<int64_t>{6}));
}

TEST(CheckpointCommit, AFailedBackgroundWriteIsAbandonedAndDrainCommitsTheNext) {
  const TempDir dir;
  test::on_thread_ranks(2, [&](int rank, ThreadGroup& group) {
    auto commit = commit_in(dir, rank, group, nullptr);
    commit->write_in_background(3, nlohmann::json::object(), Clock::now(),
                                part_of(rank, rank == 0));
    // Each rank reports its own write; the sum is what the all-reduce gives every rank.
    float mine[Agreement::kSize] = {};
    while (true) {
      std::fill(mine, mine + Agreement::kSize, 0.0f);
      commit->contribute(mine);
      if (mine[Agreement::kWritePending] == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    group.sum(mine, Agreement::kSize);
    EXPECT_EQ(mine[Agreement::kWriteFailed], 1);
    EXPECT_FALSE(commit->settle(mine, 3));
    EXPECT_FALSE(commit->in_flight());
    EXPECT_EQ(commit->last_committed(), -1);
    commit->write_in_background(4, nlohmann::json::object(), Clock::now(), part_of(rank));
    EXPECT_TRUE(commit->drain());
    EXPECT_EQ(commit->last_committed(), 4);
  });
  EXPECT_EQ(committed(dir), (std::vector<int64_t>{4}));
}

}  // namespace
}  // namespace hpctrain::train
