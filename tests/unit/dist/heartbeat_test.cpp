// The hang watchdog's limits (dist/heartbeat.hpp, docs/resilience.md "Hangs"): the hang timeout
// in force, how long a rank may stand still in each phase, the options the spec sets, and the
// verdict: whom it names (a silent rank before the furthest behind) and how.
#include "dist/heartbeat.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "dist/progress.hpp"
#include "spec/spec.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;
using progress::Phase;
using std::chrono::milliseconds;

HeartbeatOptions options(milliseconds hang, milliseconds checkpoint) {
  HeartbeatOptions o;
  o.hang_timeout = hang;
  o.checkpoint_timeout = checkpoint;
  return o;
}

// A rank at `step` in `phase`, training since step 10 in this process.
progress::Snapshot at(Phase phase, int64_t step = 12) {
  progress::Snapshot s;
  s.step = step;
  s.phase = phase;
  s.counter = 7;
  s.first = 10;
  return s;
}

// In seconds, for readable failures: the hang timeout in force; what hang_allowance() allows
// (-1: not watched).
double limit_s(const HeartbeatOptions& o, const std::vector<double>& step_seconds) {
  return static_cast<double>(hang_limit(o, step_seconds).count()) / 1000;
}
double allowed_s(const progress::Snapshot& s, milliseconds limit, const HeartbeatOptions& o) {
  const auto a = hang_allowance(s, limit, o);
  return a ? static_cast<double>(a->count()) / 1000 : -1;
}

TEST(HangLimit, TheOptionWhenSet) {
  EXPECT_EQ(limit_s(options(4s, 600s), {}), 4);
  EXPECT_EQ(limit_s(options(4s, 600s), {30.0, 30.0, 30.0}), 4);
}

// 0: ten times rank 0's median step time, at least the floor (60 s unless told).
TEST(HangLimit, AutomaticIsTenMediansAtLeastTheFloor) {
  const HeartbeatOptions o = options(0s, 600s);
  EXPECT_EQ(o.hang_floor, 60s);
  EXPECT_EQ(limit_s(o, {}), 60) << "no step yet: the floor";
  EXPECT_EQ(limit_s(o, {1.0, 2.0, 9.0}), 60) << "10 x 2 s is below the floor";
  EXPECT_EQ(limit_s(o, {12.0, 10.0, 11.0}), 110);
  EXPECT_EQ(limit_s(o, {0.5, 11.0, 11.0, 11.0, 900.0}), 110) << "the median, not the mean";
  HeartbeatOptions low = o;
  low.hang_floor = 5s;
  EXPECT_EQ(limit_s(low, {1.0, 1.0, 1.0}), 10);
}

// A save slower than the hang timeout but within the commit timeout is no hang: a checkpoint is
// allowed the larger of the two, in either order.
TEST(HangAllowance, CheckpointGetsTheLargerOfTheTwo) {
  EXPECT_EQ(allowed_s(at(Phase::kCheckpoint), 4s, options(4s, 10s)), 10)
      << "hang timeout 4 s, commit timeout 10 s";
  EXPECT_EQ(allowed_s(at(Phase::kCheckpoint), 20s, options(20s, 10s)), 20)
      << "hang timeout 20 s, commit timeout 10 s";
  // The automatic limit is compared the same way.
  EXPECT_EQ(allowed_s(at(Phase::kCheckpoint), 60s, options(0s, 600s)), 600);
  EXPECT_EQ(allowed_s(at(Phase::kCheckpoint), 900s, options(0s, 600s)), 900);
}

TEST(HangAllowance, OtherPhasesGetTheHangTimeout) {
  for (const Phase p : {Phase::kStepEnd, Phase::kEval, Phase::kDataWait, Phase::kForward,
                        Phase::kBackward, Phase::kAllReduce, Phase::kAgreement, Phase::kAverage}) {
    EXPECT_EQ(allowed_s(at(p), 4s, options(4s, 10s)), 4) << progress::phase_name(p);
    EXPECT_EQ(allowed_s(at(p), 20s, options(20s, 10s)), 20) << progress::phase_name(p);
  }
}

// Start-up, the first step of the process (communicators made, kernels tuned) and finishing are
// the collective timeout's.
TEST(HangAllowance, NotWatched) {
  const HeartbeatOptions o = options(4s, 10s);
  EXPECT_EQ(allowed_s(at(Phase::kStarting), 4s, o), -1);
  EXPECT_EQ(allowed_s(at(Phase::kFinishing), 4s, o), -1);
  EXPECT_EQ(allowed_s(at(Phase::kDataWait, /*step=*/10), 4s, o), -1)
      << "the first step of a process resumed at step 10";
  EXPECT_EQ(allowed_s(at(Phase::kCheckpoint, /*step=*/10), 4s, o), -1);
  EXPECT_EQ(allowed_s(at(Phase::kDataWait, /*step=*/11), 4s, o), 4) << "the second step";
}

// A beat at most 1.5 intervals old is on time (rank 0 reads once an interval, and a beat may fall
// just after a read); up to 3 intervals it is late; from 3 on the rank is silent.
TEST(BeatState, OnTimeLateSilent) {
  EXPECT_EQ(beat_state(0ms, 1000ms), Beat::kOnTime);
  EXPECT_EQ(beat_state(1499ms, 1000ms), Beat::kOnTime);
  EXPECT_EQ(beat_state(1500ms, 1000ms), Beat::kLate);
  EXPECT_EQ(beat_state(2999ms, 1000ms), Beat::kLate);
  EXPECT_EQ(beat_state(3000ms, 1000ms), Beat::kSilent);
  EXPECT_EQ(beat_state(60s, 1000ms), Beat::kSilent);
  // heartbeat_timeout_s = 3: beats every 600 ms, silent after 1.8 s.
  EXPECT_EQ(beat_state(1799ms, 600ms), Beat::kLate);
  EXPECT_EQ(beat_state(1800ms, 600ms), Beat::kSilent);
}

// A rank for the verdict: where it stands, how long that has stood still, how old its last beat.
RankView view(std::optional<progress::Snapshot> where, milliseconds still, milliseconds beat_age,
              std::string host) {
  RankView v;
  v.where = where;
  v.still = still;
  v.beat_age = beat_age;
  v.host = std::move(host);
  return v;
}

// With every beat on time, the furthest behind are named by phase and step, as before.
TEST(HangVerdict, AliveRanksNamedByPhase) {
  const auto v = hang_verdict({view(at(Phase::kAllReduce, 15), 5s, 0ms, "node1"),
                               view(at(Phase::kDataWait, 15), 5s, 400ms, "node2"),
                               view(at(Phase::kAllReduce, 15), 5s, 1s, "node3")},
                              4s, 5s, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, std::vector<int>{1});
  EXPECT_TRUE(v->silent.empty());
  EXPECT_EQ(v->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 1 (node2) in data wait at step 15 "
            "for 5 s; the others wait: ranks 0, 2 in all-reduce at step 15");
}

// The step counts before the phase: a rank one step behind is named even in a phase that comes
// later in a step's order than the phase the others are in.
TEST(HangVerdict, LowerStepNamedBeforeEarlierPhase) {
  const auto a = hang_verdict({view(at(Phase::kAllReduce, 14), 5s, 0ms, "node1"),
                               view(at(Phase::kDataWait, 15), 5s, 0ms, "node2")},
                              4s, 5s, 1000ms);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->named, std::vector<int>{0});
  EXPECT_EQ(a->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 0 (node1) in all-reduce at step 14 "
            "for 5 s; the others wait: rank 1 in data wait at step 15");
  const auto b = hang_verdict({view(at(Phase::kDataWait, 15), 5s, 0ms, "node1"),
                               view(at(Phase::kAllReduce, 14), 5s, 0ms, "node2")},
                              4s, 5s, 1000ms);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->named, std::vector<int>{1});
}

// A stopped rank whose last word is ahead of a live rank's (or level with the others) is still
// the one named: it is silent, with the step and phase it last published, not a later guess.
TEST(HangVerdict, SilentRankNamedWithItsLastProgress) {
  const auto v = hang_verdict({view(at(Phase::kAllReduce, 10), 5s, 0ms, "node1"),
                               view(at(Phase::kForward, 10), 4200ms, 4200ms, "node2"),
                               view(at(Phase::kAllReduce, 10), 5s, 800ms, "")},
                              4s, 5s, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, std::vector<int>{1});
  EXPECT_EQ(v->silent, std::vector<int>{1});
  EXPECT_EQ(v->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 1 (node2) silent for 4.2 s (no "
            "heartbeat; last heard in forward at step 10); the others wait: ranks 0, 2 in "
            "all-reduce at step 10");
}

// Silent before its first step was published: no "start-up at step 0" passed off as a position.
TEST(HangVerdict, SilentSinceStartUp) {
  progress::Snapshot starting;  // what a rank publishes as its heartbeat starts
  const auto v = hang_verdict(
      {view(at(Phase::kAllReduce, 10), 5s, 0ms, "node1"), view(starting, 0ms, 6s, "node2"),
       view(std::nullopt, 0ms, 6s, "node3"), view(at(Phase::kDataWait, 10), 5s, 200ms, "node4")},
      4s, 5s, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, (std::vector<int>{1, 2}));
  EXPECT_EQ(v->silent, (std::vector<int>{1, 2}));
  EXPECT_EQ(v->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 1 (node2) silent for 6 s (no "
            "heartbeat; nothing heard since its start-up), rank 2 (node3) silent for 6 s (no "
            "heartbeat; nothing heard since its start-up); the others wait: rank 0 in all-reduce "
            "at step 10, rank 3 in data wait at step 10");
}

// A late beat (1.5 to 3 intervals) holds the verdict back: the rank may have stopped a moment
// ago (it stays silent: named so at the next beat) or be merely slow (it beats: named by phase).
TEST(HangVerdict, LateBeatWaitsForTheNextOne) {
  EXPECT_FALSE(hang_verdict({view(at(Phase::kAllReduce, 10), 5s, 0ms, "node1"),
                             view(at(Phase::kDataWait, 10), 3s, 2500ms, "node2")},
                            4s, 5s, 1000ms));
  EXPECT_FALSE(hang_verdict({view(at(Phase::kAllReduce, 10), 5s, 0ms, "node1"),
                             view(at(Phase::kDataWait, 10), 3s, 1500ms, "node2"),
                             view(at(Phase::kDataWait, 9), 3s, 9s, "node3")},
                            4s, 5s, 1000ms))
      << "one late beat holds back even a verdict with a silent rank";
}

// A rank that finished stops beating as it leaves: neither late nor silent.
TEST(HangVerdict, FinishedRankIsNotSilent) {
  const auto v = hang_verdict({view(at(Phase::kAllReduce, 10), 5s, 0ms, "node1"),
                               view(at(Phase::kFinishing, 10), 5s, 2s, "node2"),
                               view(at(Phase::kFinishing, 10), 5s, 9s, "node3")},
                              4s, 5s, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_TRUE(v->silent.empty());
  EXPECT_EQ(v->named, std::vector<int>{0});
}

// The spec's [resilience] and [checkpoint] timeouts, and the statuses the step supervisor reads.
TEST(HeartbeatOptionsFromSpec, TimeoutsAndStatuses) {
  spec::Spec s;
  s.resilience.heartbeat_timeout_s = 7;
  s.resilience.hang_timeout_s = 45;
  s.checkpoint.commit_timeout_s = 300;
  const HeartbeatOptions o = heartbeat_options_from_spec(s);
  EXPECT_EQ(o.timeout, 7s);
  EXPECT_EQ(o.hang_timeout, 45s);
  EXPECT_EQ(o.checkpoint_timeout, 300s);
  EXPECT_EQ(o.exit_status, kExitPeerLost);
  EXPECT_EQ(o.hang_exit_status, kExitHang);
  // hang_timeout_s = 0: the automatic limit.
  s.resilience.hang_timeout_s = 0;
  EXPECT_EQ(heartbeat_options_from_spec(s).hang_timeout, 0s);
  EXPECT_EQ(limit_s(heartbeat_options_from_spec(s), {2.0}), 60);
}

}  // namespace
}  // namespace hpctrain::dist
