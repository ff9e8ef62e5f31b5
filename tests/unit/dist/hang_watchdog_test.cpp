// dist/hang_watchdog.hpp: rank 0 judges what the nodes' records report, forms the verdict and has
// it recorded; a rank that leaves is not watched; carrying a verdict out (on an in-memory store,
// memory_kv_store.hpp) ends the rank with the hang status. Times are passed in: no test sleeps.
#include "dist/hang_watchdog.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/progress.hpp"
#include "memory_kv_store.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

const auto kTwoHosts =
    std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"node1", "node2"});
using Where = std::vector<std::optional<progress::Snapshot>>;
const std::vector<milliseconds> kBothOnTime = {0ms, 0ms};

// This process's progress (what every watchdog here publishes): step 12 in `phase`, training since
// step 10.
void stand_at(progress::Phase phase) {
  progress::begin_training(10);
  progress::set_step(12);
  progress::enter(phase);
}

TEST(HangWatchdog, RankZeroJudgesWhatTheRecordsReportAndRecordsTheVerdict) {
  stand_at(progress::Phase::kForward);
  std::vector<int> recorded;
  std::string recorded_message;
  HangOptions o;
  o.hang_timeout = 4s;
  o.on_hang = [&](const std::vector<int>& named, const std::string& message) {
    recorded = named;
    recorded_message = message;
  };
  HangWatchdog rank0(o, 0, 2, kTwoHosts, 1000ms);
  const auto t0 = Clock::now();
  EXPECT_FALSE(rank0.watch_reported(t0, Where(2), kBothOnTime));
  const Where rank1_reports = {std::nullopt, progress::snapshot()};
  EXPECT_FALSE(rank0.watch_reported(t0 + 1s, rank1_reports, kBothOnTime));
  EXPECT_FALSE(rank0.watch_reported(t0 + 3999ms, rank1_reports, kBothOnTime));
  EXPECT_TRUE(recorded.empty());

  const auto v = rank0.watch_reported(t0 + 5s, rank1_reports, kBothOnTime);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, (std::vector<int>{0, 1}));
  EXPECT_EQ(v->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 0 (node1) in forward at step 12 "
            "for 5 s, rank 1 (node2) in forward at step 12 for 4 s (every rank)");
  EXPECT_EQ(recorded, v->named);
  EXPECT_EQ(recorded_message, v->message);
  EXPECT_FALSE(rank0.ending());
}

TEST(HangWatchdog, ALeavingRankIsNotWatched) {
  stand_at(progress::Phase::kAgreement);
  HangOptions o;
  o.hang_timeout = 4s;
  HangWatchdog rank0(o, 0, 2, kTwoHosts, 1000ms);
  progress::Snapshot finishing = progress::snapshot();
  finishing.phase = progress::Phase::kFinishing;
  const Where rank1_left = {std::nullopt, finishing};
  const auto t0 = Clock::now();
  EXPECT_FALSE(rank0.watch_reported(t0, rank1_left, kBothOnTime));
  progress::enter(progress::Phase::kBackward);  // rank 0 moves; rank 1 has left
  EXPECT_FALSE(rank0.watch_reported(t0 + 6s, rank1_left, kBothOnTime));
  const auto v = rank0.watch_reported(t0 + 20s, rank1_left, {0ms, 9s});
  ASSERT_TRUE(v) << "a finishing rank's stopped beats hold nothing back";
  EXPECT_EQ(v->named, std::vector<int>{0});
  EXPECT_TRUE(v->silent.empty());
  EXPECT_EQ(v->message,
            "hang: no progress for 14 s (hang timeout 4 s): rank 0 (node1) in backward at step 12 "
            "for 14 s; the others wait: rank 1 in finishing at step 12");
}

TEST(HangWatchdog, AFailedRecordDoesNotStopTheVerdict) {
  stand_at(progress::Phase::kDataWait);
  HangOptions o;
  o.hang_timeout = 1s;
  o.on_hang = [](const std::vector<int>&, const std::string&) {
    throw std::runtime_error("metrics.jsonl: disk full");
  };
  HangWatchdog rank0(
      o, 0, 1, std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"node1"}),
      1000ms);
  const auto t0 = Clock::now();
  EXPECT_FALSE(rank0.watch_reported(t0, Where(1), {0ms}));
  testing::internal::CaptureStderr();
  const auto v = rank0.watch_reported(t0 + 2s, Where(1), {0ms});
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, std::vector<int>{0});
  EXPECT_NE(err.find("could not record the hang: metrics.jsonl: disk full"), std::string::npos)
      << err;
}

// The progress comes from HangOptions::progress where set (the emulator's ranks), not the
// process's.
TEST(HangWatchdog, AProgressSourceOfItsOwn) {
  stand_at(progress::Phase::kForward);
  HangOptions o;
  o.hang_timeout = 4s;
  progress::Snapshot mine;
  mine.step = 3;
  mine.first = 1;
  mine.phase = progress::Phase::kDataWait;
  mine.counter = 99;
  o.progress = [&] { return mine; };
  HangWatchdog rank0(o, 0, 1, kTwoHosts, 1000ms);
  const auto t0 = Clock::now();
  EXPECT_FALSE(rank0.watch_reported(t0, Where(1), {0ms}));
  const auto v = rank0.watch_reported(t0 + 5s, Where(1), {0ms});
  ASSERT_TRUE(v);
  EXPECT_NE(v->message.find("rank 0 (node1) in data wait at step 3"), std::string::npos)
      << v->message;
}

// A rank named alone ends at once (no stacks asked for, nobody else's to wait for), with the
// line and the hang status.
TEST(HangWatchdogDeathTest, CarryingOutEndsTheRankWithTheHangStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const MemoryKvStore memory;
  auto store = memory.connection();
  HangOptions o;
  o.hang_exit_status = 77;
  o.dump_stacks = false;
  HangWatchdog rank1(o, 1, 2, kTwoHosts, 10ms);
  HangVerdict v;
  v.named = {1};
  v.message = "hang: no progress for 5 s";
  EXPECT_EXIT(rank1.carry_out(*store, "rank 0 reports: " + v.message, v),
              testing::ExitedWithCode(77),
              "rank 0 reports: hang: no progress for 5 s; stopping this rank \\(exit status 77\\)");
}

}  // namespace
}  // namespace hpctrain::dist
