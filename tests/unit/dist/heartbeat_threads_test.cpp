// dist/heartbeat.hpp's own threads, on an in-memory store (memory_kv_store.hpp) whose "ranks" are
// threads of this process: every rank beats and rank 0 watches while training moves, and they
// leave in order without a verdict, alone or two to a node (one record a node in the store, the
// node's board in shared memory); a rank that stops beating is named lost by rank 0, a member
// with its host and phase, a silent leader with its node; rank 0's verdict ends another rank; a
// store that stops answering (a cut link) is noticed; a hang ends the ranks with the hang status.
// The process-wide progress (dist/progress.hpp) stands for every rank's unless a test gives a
// rank its own. Also built under ThreadSanitizer (tsan.heartbeat_tsan_tests, scripts/test.sh).
#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "dist/heartbeat.hpp"
#include "dist/node_board.hpp"
#include "dist/progress.hpp"
#include "memory_kv_store.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;

constexpr int kLostStatus = 7;
constexpr int kHangStatus = 8;

// Beats every 100 ms, lost after 500 ms; no hang verdict unless a test asks for one.
HeartbeatOptions quick(int rank, int world_size) {
  HeartbeatOptions o;
  o.rank = rank;
  o.world_size = world_size;
  std::vector<std::string> hosts = {"node1", "node2", "node3", "node4"};
  hosts.resize(static_cast<size_t>(world_size));
  o.hosts = std::make_shared<const std::vector<std::string>>(hosts);
  o.store_address = "node1:29500";
  o.timeout = 500ms;
  o.exit_status = kLostStatus;
  o.hang_timeout = 600s;
  o.checkpoint_timeout = 600s;
  o.hang_exit_status = kHangStatus;
  o.dump_stacks = false;
  return o;
}

// Training that moves: a new step every 5 ms until destroyed.
class Training {
 public:
  Training() {
    progress::begin_training(0);
    thread_ = std::thread([this] {
      for (int64_t step = 1; !stop_.load(); ++step) {
        progress::set_step(step);
        progress::enter(progress::Phase::kForward);
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~Training() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Each rank alone on its node: one record each in the store.
TEST(HeartbeatThreads, FourRanksBeatWatchAndLeaveInOrder) {
  const MemoryKvStore store;
  Training training;
  std::vector<std::unique_ptr<Heartbeat>> ranks;
  for (int r = 0; r < 4; ++r) {
    ranks.push_back(std::make_unique<Heartbeat>(store.connection(), quick(r, 4)));
  }
  // Three timeouts: a verdict would have ended this process with status 7.
  std::this_thread::sleep_for(1500ms);
  const auto look = store.connection();
  for (int r = 1; r < 4; ++r) {
    const std::string record = look->get("hb/node/" + std::to_string(r));
    EXPECT_GE(std::stoll(record), 8) << "rank " << r << " posts once per 100 ms: " << record;
    EXPECT_NE(record.find("\n" + std::to_string(r) + " 0 0 "), std::string::npos) << record;
  }
  EXPECT_FALSE(look->check("hb/node/0")) << "rank 0 reads, it does not post";
  EXPECT_FALSE(look->check("hb/verdict"));

  // Leaving together: rank 0, which serves the store, waits for the others' goodbyes only as
  // long as they take, not for its deadline.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> leaving;
  for (auto& rank : ranks) leaving.emplace_back([&rank] { rank->leave(); });
  for (auto& t : leaving) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 450ms);
  const std::string last = look->get("hb/node/2");
  EXPECT_NE(last.find("\n2 0 1 "), std::string::npos) << "left: " << last;
  EXPECT_NE(last.find(" " + std::to_string(static_cast<int>(progress::Phase::kFinishing)) + " "),
            std::string::npos)
      << "finishing: " << last;
  ranks.clear();
  EXPECT_FALSE(look->check("hb/verdict"));
}

// Two ranks a node, with a board token: only the nodes' leaders post, the members beat on their
// node's board, which the leader removes when its node has left.
TEST(HeartbeatThreads, TwoRanksANodeOneRecordPerNode) {
  const MemoryKvStore store;
  Training training;
  const auto hosts = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"nodeA", "nodeA", "nodeB", "nodeB"});
  const std::string token = "t" + std::to_string(::getpid()) + "pairs";
  std::vector<std::unique_ptr<Heartbeat>> ranks;
  for (int r = 0; r < 4; ++r) {
    auto o = quick(r, 4);
    o.hosts = hosts;
    o.board_token = token;
    ranks.push_back(std::make_unique<Heartbeat>(store.connection(), o));
  }
  std::this_thread::sleep_for(1500ms);
  const auto look = store.connection();
  EXPECT_FALSE(look->check("hb/node/1"));
  EXPECT_FALSE(look->check("hb/node/3"));
  const std::string record = look->get("hb/node/2");
  EXPECT_NE(record.find("\n2 0 0 "), std::string::npos) << record;
  EXPECT_NE(record.find("\n3 "), std::string::npos)
      << "the member in its leader's record: " << record;
  EXPECT_FALSE(look->check("hb/verdict"));
  const std::string board = NodeBoard::path_for(token, "nodeB");
  EXPECT_EQ(::access(board.c_str(), F_OK), 0) << board;

  std::vector<std::thread> leaving;
  for (auto& rank : ranks) leaving.emplace_back([&rank] { rank->leave(); });
  for (auto& t : leaving) t.join();
  EXPECT_NE(look->get("hb/node/2").find("\n3 "), std::string::npos);
  EXPECT_NE(look->get("hb/node/2").find(" 1 "), std::string::npos) << "left";
  EXPECT_NE(::access(board.c_str(), F_OK), 0) << "the leader removes its node's board";
  EXPECT_NE(::access(NodeBoard::path_for(token, "nodeA").c_str(), F_OK), 0);
  ranks.clear();
  EXPECT_FALSE(look->check("hb/verdict"));
}

// Every rank's verdict line, as on_end receives it (no process ends).
class Verdicts {
 public:
  std::function<void(int, const std::string&)> hook(int rank) {
    return [this, rank](int status, const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace(rank, std::to_string(status) + " " + line);
      changed_.notify_all();
    };
  }
  // Waits (5 s at most) until every rank but `silent` of `world` has one; those lines.
  std::map<int, std::string> wait_for_all_but(int silent, int world) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto others_in = [&] {
      for (int r = 0; r < world; ++r) {
        if (r != silent && !lines_.count(r)) return false;
      }
      return true;
    };
    changed_.wait_for(lock, 5s, others_in);
    auto out = lines_;
    // A stopped process's threads all stand still; here only its beat thread does, and its
    // other thread may notice that: not a line a stopped rank would print.
    out.erase(silent);
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<int, std::string> lines_;
};

// A rank whose heartbeat thread stands still (a stopped process): `frozen` blocks its progress
// source, where its beat asks, until released.
class Freezer {
 public:
  ~Freezer() { release(); }
  std::function<progress::Snapshot()> source(bool* frozen_flag) {
    return [this, frozen_flag] {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return !*frozen_flag || released_; });
      return progress::snapshot();
    };
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  std::mutex mutex_;

 private:
  std::condition_variable changed_;
  bool released_ = false;
};

// Ranks 0, 1 on nodeA, 2, 3 on nodeB; `silent` stops beating once they all run.
std::map<int, std::string> one_rank_falls_silent(int silent) {
  const MemoryKvStore store;
  Training training;
  Verdicts verdicts;
  Freezer freezer;
  bool frozen[4] = {false, false, false, false};
  const auto hosts = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"nodeA", "nodeA", "nodeB", "nodeB"});
  const std::string token = "t" + std::to_string(::getpid()) + "silent" + std::to_string(silent);
  std::vector<std::unique_ptr<Heartbeat>> ranks;
  for (int r = 0; r < 4; ++r) {
    auto o = quick(r, 4);
    o.hosts = hosts;
    o.board_token = token;
    o.on_end = verdicts.hook(r);
    o.progress = freezer.source(&frozen[r]);
    ranks.push_back(std::make_unique<Heartbeat>(store.connection(), o));
  }
  std::this_thread::sleep_for(300ms);
  {
    std::lock_guard<std::mutex> lock(freezer.mutex_);
    frozen[silent] = true;
  }
  auto lines = verdicts.wait_for_all_but(silent, 4);
  freezer.release();
  ranks.clear();
  ::unlink(NodeBoard::path_for(token, "nodeA").c_str());
  ::unlink(NodeBoard::path_for(token, "nodeB").c_str());
  return lines;
}

TEST(HeartbeatThreads, ASilentMemberIsNamedWithItsHostAndPhaseByEveryRank) {
  const auto lines = one_rank_falls_silent(3);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(std::regex_search(
      lines.at(0), std::regex("^7 .*lost rank 3 \\(nodeB\\): no heartbeat for [0-9.]+ s, last in "
                              "forward at step [0-9]+; stopping this rank")))
      << lines.at(0);
  for (const int r : {1, 2}) {
    EXPECT_NE(lines.at(r).find("rank 0 reports: lost rank 3 (nodeB)"), std::string::npos)
        << lines.at(r);
  }
}

// The leader falls silent: rank 0 names it and its node; its member, whose leader passes on no
// verdict, notices its leader's silence itself.
TEST(HeartbeatThreads, ASilentLeaderIsNamedWithItsNode) {
  const auto lines = one_rank_falls_silent(2);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines.at(0).find("lost rank 2 (nodeB): no heartbeat for"), std::string::npos)
      << lines.at(0);
  EXPECT_NE(lines.at(0).find("(its node's heartbeat leader: all 2 ranks of the node are unheard)"),
            std::string::npos)
      << lines.at(0);
  EXPECT_NE(lines.at(1).find("rank 0 reports: lost rank 2 (nodeB)"), std::string::npos)
      << lines.at(1);
  EXPECT_NE(lines.at(3).find("no beat from rank 2 (nodeB), this node's heartbeat leader, for"),
            std::string::npos)
      << lines.at(3);
}

// Rank 1 never beats (its process is gone): rank 0 names it, posts the verdict for the others and
// ends itself.
TEST(HeartbeatThreadsDeathTest, ARankThatStopsBeatingIsNamedLost) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const MemoryKvStore store;
        Training training;
        Heartbeat rank0(store.connection(), quick(0, 2));
        std::this_thread::sleep_for(10s);
      },
      testing::ExitedWithCode(kLostStatus),
      "lost rank 1 \\(node2\\): no heartbeat for [0-9.]+ s; stopping this rank \\(exit status "
      "7\\)");
}

TEST(HeartbeatThreadsDeathTest, RankZerosVerdictEndsTheOthers) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const MemoryKvStore store;
        Training training;
        Heartbeat rank1(store.connection(), quick(1, 3));
        store.connection()->set("hb/verdict", "lost rank 2 (node3): no heartbeat for 10 s");
        std::this_thread::sleep_for(10s);
      },
      testing::ExitedWithCode(kLostStatus),
      "rank 0 reports: lost rank 2 \\(node3\\): no heartbeat for 10 s; stopping this rank");
}

// A cut link: the beat's round trip neither answers nor throws; the other thread notices.
TEST(HeartbeatThreadsDeathTest, AStoreThatStopsAnsweringIsNoticed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MemoryKvStore store;
        Training training;
        Heartbeat rank1(store.connection(), quick(1, 2));
        store.freeze();
        std::this_thread::sleep_for(10s);
      },
      testing::ExitedWithCode(kLostStatus),
      "no answer from the store on rank 0 \\(node1\\) at node1:29500 for [0-9.]+ s");
}

// Neither rank's training moves for the hang timeout: rank 0 posts the verdict, rank 1 reads it
// on its next beat, and both end with the hang status once rank 1 has heard it.
TEST(HeartbeatThreadsDeathTest, AHangEndsTheRanksWithTheHangStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const MemoryKvStore store;
        progress::begin_training(10);
        progress::set_step(12);
        progress::enter(progress::Phase::kBackward);
        auto o0 = quick(0, 2);
        o0.hang_timeout = 700ms;
        auto o1 = quick(1, 2);
        o1.hang_timeout = 700ms;
        Heartbeat rank0(store.connection(), o0);
        Heartbeat rank1(store.connection(), o1);
        std::this_thread::sleep_for(10s);
      },
      testing::ExitedWithCode(kHangStatus),
      "hang: no progress for [0-9.]+ s \\(hang timeout [0-9.]+ s\\): rank 0 \\(node1\\) in "
      "backward at "
      "step 12");
}

}  // namespace
}  // namespace hpctrain::dist
