// dist/hang_verdict.hpp beyond the verdict itself (heartbeat_test has those): rank 0's record of
// every rank's progress (ProgressWatch: when a rank stands still, rank 0's step times behind the
// automatic timeout, the beats and hosts that reach the verdict) and the verdict's text in the
// store. Torch-free.
#include "dist/hang_verdict.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;
using progress::Phase;
using std::chrono::milliseconds;

// A rank at `step` in `phase` whose counter reads `counter`, training since step 10.
progress::Snapshot at(Phase phase, int64_t step, uint64_t counter) {
  progress::Snapshot s;
  s.step = step;
  s.phase = phase;
  s.counter = counter;
  s.first = 10;
  return s;
}

HangOptions hang_after(milliseconds timeout) {
  HangOptions o;
  o.hang_timeout = timeout;
  return o;
}

const std::vector<milliseconds> kOnTime = {0ms, 0ms};
const std::vector<std::string> kHosts = {"node1", "node2"};

TEST(ProgressWatch, NamesTheRankWhoseCounterStoodStillPastTheLimit) {
  ProgressWatch watch(2);
  const auto t0 = Clock::time_point{} + 1000s;
  const HangOptions o = hang_after(4s);
  for (const auto t : {t0, t0 + 3s, t0 + 5s}) {
    watch.observe(0, at(Phase::kAgreement, 12, /*counter=*/static_cast<uint64_t>((t - t0) / 1s)),
                  t);
    watch.observe(1, at(Phase::kDataWait, 12, /*counter=*/7), t);
  }
  const auto v = watch.check(t0 + 5s, o, kOnTime, kHosts, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, std::vector<int>{1});
  EXPECT_EQ(v->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 1 (node2) in data wait at step 12 "
            "for 5 s; the others wait: rank 0 in agreement at step 12");
}

TEST(ProgressWatch, NoVerdictWithinTheLimitOrOnceTheCounterMoves) {
  ProgressWatch watch(2);
  const auto t0 = Clock::time_point{} + 1000s;
  const HangOptions o = hang_after(4s);
  watch.observe(0, at(Phase::kForward, 12, 1), t0);
  watch.observe(1, at(Phase::kForward, 12, 1), t0);
  EXPECT_FALSE(watch.check(t0 + 3999ms, o, kOnTime, kHosts, 1000ms));
  watch.observe(0, at(Phase::kForward, 12, 2), t0 + 3999ms);
  watch.observe(1, at(Phase::kBackward, 12, 2), t0 + 3999ms);
  EXPECT_FALSE(watch.check(t0 + 7s, o, kOnTime, kHosts, 1000ms)) << "both moved at 3.999 s";
  EXPECT_TRUE(watch.check(t0 + 7999ms, o, kOnTime, kHosts, 1000ms));
}

// A rank that has published nothing is not watched; its progress stands still from the first
// observation of what it published.
TEST(ProgressWatch, UnpublishedRankIsNotWatched) {
  ProgressWatch watch(2);
  const auto t0 = Clock::time_point{} + 1000s;
  const HangOptions o = hang_after(4s);
  watch.observe(0, at(Phase::kStepEnd, 12, 1), t0);
  watch.observe(1, std::nullopt, t0);
  watch.observe(0, at(Phase::kStepEnd, 13, 2), t0 + 9s);
  watch.observe(1, std::nullopt, t0 + 9s);
  EXPECT_FALSE(watch.check(t0 + 9s, o, kOnTime, kHosts, 1000ms));
  watch.observe(1, at(Phase::kDataWait, 12, 5), t0 + 9s);
  EXPECT_FALSE(watch.check(t0 + 9s, o, kOnTime, kHosts, 1000ms)) << "first seen now";
  const auto v = watch.check(t0 + 13s, o, kOnTime, kHosts, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->named, std::vector<int>{1});
}

// hang_timeout 0: ten times rank 0's median seconds per step, measured between the observations
// at which its step changed, at least the floor.
TEST(ProgressWatch, AutomaticLimitFromRankZerosStepTimes) {
  ProgressWatch watch(1);
  HangOptions o = hang_after(0s);
  o.hang_floor = 1s;
  const auto t0 = Clock::time_point{} + 1000s;
  for (int i = 0; i < 3; ++i) {
    const auto t = t0 + i * 2s;
    watch.observe(0, at(Phase::kForward, 11 + i, static_cast<uint64_t>(i)), t);
    EXPECT_FALSE(watch.check(t, o, {0ms}, {}, 1000ms));
  }
  // 2 s a step: 20 s, from the last change at t0 + 4 s.
  EXPECT_FALSE(watch.check(t0 + 4s + 19999ms, o, {0ms}, {}, 1000ms));
  const auto v = watch.check(t0 + 4s + 20s, o, {0ms}, {}, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->message,
            "hang: no progress for 20 s (hang timeout 20 s): rank 0 in forward at step 13 for "
            "20 s (every rank)");
}

// The beat ages reach the verdict: a late beat holds it back, a silent one is named.
TEST(ProgressWatch, BeatAgesReachTheVerdict) {
  ProgressWatch watch(2);
  const auto t0 = Clock::time_point{} + 1000s;
  const HangOptions o = hang_after(4s);
  watch.observe(0, at(Phase::kAllReduce, 12, 1), t0);
  watch.observe(1, at(Phase::kForward, 12, 1), t0);
  EXPECT_FALSE(watch.check(t0 + 5s, o, {0ms, 2s}, kHosts, 1000ms));
  const auto v = watch.check(t0 + 5s, o, {0ms, 3s}, kHosts, 1000ms);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->silent, std::vector<int>{1});
  EXPECT_EQ(v->message,
            "hang: no progress for 5 s (hang timeout 4 s): rank 1 (node2) silent for 3 s (no "
            "heartbeat; last heard in forward at step 12); the others wait: rank 0 in all-reduce "
            "at step 12");
}

TEST(HangVerdictText, RoundTripsThroughTheStoreText) {
  HangVerdict v;
  v.named = {1, 3};
  v.silent = {3};
  v.message = "hang: no progress for 5 s (hang timeout 4 s): two\nlines";
  const std::string text = encode_hang_verdict(v);
  EXPECT_EQ(text, "hang\n1,3\n3\nhang: no progress for 5 s (hang timeout 4 s): two\nlines");
  const auto back = decode_hang_verdict(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->named, v.named);
  EXPECT_EQ(back->silent, v.silent);
  EXPECT_EQ(back->message, v.message);

  const auto none_silent = decode_hang_verdict(encode_hang_verdict({{0}, {}, "m"}));
  ASSERT_TRUE(none_silent);
  EXPECT_EQ(none_silent->named, std::vector<int>{0});
  EXPECT_TRUE(none_silent->silent.empty());
  EXPECT_EQ(none_silent->message, "m");
}

// A lost rank's verdict shares the key: it is not a hang.
TEST(HangVerdictText, OtherVerdictsAreNotHangs) {
  EXPECT_FALSE(decode_hang_verdict("lost rank 3 (node2): no heartbeat for 10.2 s"));
  EXPECT_FALSE(decode_hang_verdict(""));
  EXPECT_FALSE(decode_hang_verdict("hang"));
}

}  // namespace
}  // namespace hpctrain::dist
