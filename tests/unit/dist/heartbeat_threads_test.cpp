// dist/heartbeat.hpp's own threads, on an in-memory store (memory_kv_store.hpp) whose "ranks" are
// threads of this process: every rank beats and rank 0 watches while training moves, and they
// leave in order without a verdict; a rank that stops beating is named lost by rank 0; rank 0's
// verdict ends another rank; a store that stops answering (a cut link) is noticed; a hang ends
// the ranks with the hang status. The process-wide progress (dist/progress.hpp) stands for every
// rank's. Also built under ThreadSanitizer (tsan.heartbeat_tsan_tests, scripts/test.sh).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/heartbeat.hpp"
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
  o.hosts = {"node1", "node2", "node3", "node4"};
  o.hosts.resize(static_cast<size_t>(world_size));
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
  for (int r = 0; r < 4; ++r) {
    const auto beats = std::stoll(look->get("hb/beat/" + std::to_string(r)));
    EXPECT_GE(beats, 8) << "rank " << r << " beats once per 100 ms";
  }
  EXPECT_TRUE(look->check("hb/where/3")) << "ranks other than 0 publish their progress";
  EXPECT_FALSE(look->check("hb/verdict"));

  // Leaving together: rank 0, which serves the store, waits for the others' goodbyes only as
  // long as they take, not for its deadline.
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> leaving;
  for (auto& rank : ranks) leaving.emplace_back([&rank] { rank->leave(); });
  for (auto& t : leaving) t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 450ms);
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(look->check("hb/left/" + std::to_string(r))) << r;
  EXPECT_EQ(progress::parse(look->get("hb/where/2"))->phase, progress::Phase::kFinishing);
  ranks.clear();
  EXPECT_FALSE(look->check("hb/verdict"));
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
