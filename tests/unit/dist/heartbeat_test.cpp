// The hang watchdog's limits (dist/heartbeat.hpp, docs/resilience.md "Hangs"): the hang timeout
// in force, how long a rank may stand still in each phase, and the options the spec sets.
#include "dist/heartbeat.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/progress.hpp"
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

// The spec's [resilience] and [checkpoint] timeouts, and the statuses the batch script reads.
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
