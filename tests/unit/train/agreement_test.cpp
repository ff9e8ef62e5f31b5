// The per-step agreement's torch-free part (train/agreement.hpp): the stop verdict read from the
// agreed slots, and the device path's one-step-late queue.
#include "train/agreement.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <string>

namespace hpctrain::train {
namespace {

TEST(Agreement, ARankWithASignalRaisesTheStopSlot) {
  float slots[Agreement::kSize] = {};
  contribute_stop(slots, /*pending_signal=*/0);
  EXPECT_EQ(slots[Agreement::kStop], 0);
  contribute_stop(slots, SIGUSR1);
  EXPECT_EQ(slots[Agreement::kStop], 1);
  for (int i = 0; i < Agreement::kSize; ++i) {
    if (i != Agreement::kStop) {
      EXPECT_EQ(slots[i], 0) << "slot " << i;
    }
  }
}

TEST(Agreement, NothingAgreedTrainsOn) {
  EXPECT_FALSE(stop_reason(kNothingAgreed, /*own_signal=*/0));
  float slots[Agreement::kSize] = {};
  slots[Agreement::kSaveNow] = 1;
  slots[Agreement::kWritePending] = 3;
  slots[Agreement::kFoundInf] = 2;
  EXPECT_FALSE(stop_reason(slots, /*own_signal=*/0)) << "a save, a write, a skipped step";
}

// The sum over the ranks: any rank's signal stops every rank, and each says whose it was.
TEST(Agreement, AStopSignalOnAnyRankStopsAll) {
  float slots[Agreement::kSize] = {};
  slots[Agreement::kStop] = 2;  // two ranks had one
  EXPECT_EQ(stop_reason(slots, SIGTERM), std::string("signal ") + ::strsignal(SIGTERM));
  EXPECT_EQ(stop_reason(slots, /*own_signal=*/0), "a stop signal on another rank");
}

TEST(Agreement, TheTimeLimitStops) {
  float slots[Agreement::kSize] = {};
  slots[Agreement::kDeadline] = 1;
  EXPECT_EQ(stop_reason(slots, /*own_signal=*/0), "the job's time limit is near");
  slots[Agreement::kStop] = 1;
  EXPECT_EQ(stop_reason(slots, /*own_signal=*/0), "a stop signal on another rank")
      << "a signal says more than the clock";
}

// Step s queues its agreement and acts on step s-1's: the first step has none, and each one is
// acted on once, with the step it was gathered at.
TEST(OneStepLate, EachStepActsOnTheOneBefore) {
  OneStepLate<std::string> late;
  EXPECT_FALSE(late.take()) << "nothing queued";
  late.push("step 0", /*gathered_at=*/0);
  EXPECT_FALSE(late.take()) << "the first step has nothing to act on";
  late.push("step 1", /*gathered_at=*/1);
  auto ready = late.take();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->value, "step 0");
  EXPECT_EQ(ready->gathered_at, 0);
  EXPECT_FALSE(late.take()) << "taken once";
  late.push("step 2", /*gathered_at=*/2);
  ready = late.take();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->value, "step 1");
  EXPECT_EQ(ready->gathered_at, 1);
}

// A step that did not take its agreement (none does; the queue does not pile up) loses it to
// the next.
TEST(OneStepLate, HoldsOneAgreementToActOn) {
  OneStepLate<int> late;
  late.push(10, 10);
  late.push(11, 11);
  late.push(12, 12);
  const auto ready = late.take();
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->value, 11);
  EXPECT_EQ(ready->gathered_at, 11);
}

}  // namespace
}  // namespace hpctrain::train
