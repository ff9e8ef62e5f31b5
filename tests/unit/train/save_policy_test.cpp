// The save policy (train/save_policy.hpp) played over steps, clocks and deadlines, as the
// trainer feeds it.
#include "train/save_policy.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace hpctrain::train {
namespace {

// The steps of 1..total at which the policy saves when nothing else happens, every step taking
// `step_s` seconds from t = 0 (the policy told of each save as the trainer does).
std::vector<int64_t> saved_steps(SavePolicy& policy, int64_t total, double step_s) {
  std::vector<int64_t> saved;
  for (int64_t step = 1; step <= total; ++step) {
    const double now = static_cast<double>(step) * step_s;
    const SaveRequest r = policy.request(now, /*unix_now=*/0, step_s);
    if (policy.at_step_end(step, total, /*stopping=*/false, r.save_now, /*gathered_at=*/step - 1) !=
        SaveKind::kNone) {
      saved.push_back(step);
      policy.began(step, now);
    }
  }
  return saved;
}

TEST(SavePolicy, EveryStepsSavesTheMultiplesButNotTheLastStep) {
  SavePolicyOptions o;
  o.every_steps = 4;
  SavePolicy policy(o, 0);
  EXPECT_EQ(saved_steps(policy, 12, 1.0), (std::vector<int64_t>{4, 8}));
  SavePolicy none({}, 0);
  EXPECT_TRUE(saved_steps(none, 50, 100.0).empty());
}

TEST(SavePolicy, EveryMinutesCountsFromTheLastSaveBegan) {
  SavePolicyOptions o;
  o.every_minutes = 1;
  SavePolicy policy(o, 0);
  // 25 s a step: 60 s pass at step 3 (75 s), then 3 steps after each save.
  EXPECT_EQ(saved_steps(policy, 12, 25.0), (std::vector<int64_t>{3, 6, 9}));
  EXPECT_FALSE(policy.request(59.9, 0, 1).save_now);
  EXPECT_TRUE(policy.request(300, 0, 1).save_now);
  policy.began(10, 299);
  EXPECT_FALSE(policy.request(300, 0, 1).save_now);
  EXPECT_TRUE(policy.request(359, 0, 1).save_now);
}

TEST(SavePolicy, BothRulesTogetherSaveOnceAStep) {
  SavePolicyOptions o;
  o.every_steps = 5;
  o.every_minutes = 0.5;
  SavePolicy policy(o, 0);
  EXPECT_EQ(saved_steps(policy, 16, 10.0), (std::vector<int64_t>{3, 5, 8, 10, 13, 15}));
}

TEST(SavePolicy, ASaveRequestGatheredBeforeTheNewestSaveIsSpent) {
  SavePolicyOptions o;
  o.every_minutes = 1;
  SavePolicy policy(o, 0);
  // The device path acts on the agreement one step late: the request gathered at step 7 reaches
  // step 9, after a save of step 8 began (stopping, say): it is spent.
  policy.began(8, 100);
  EXPECT_EQ(policy.at_step_end(9, 100, false, /*save_now=*/true, /*gathered_at=*/7),
            SaveKind::kNone);
  EXPECT_EQ(policy.at_step_end(9, 100, false, true, /*gathered_at=*/8), SaveKind::kBlocking);
}

TEST(SavePolicy, StoppingSavesBlockingAtAnyStepEvenTheLast) {
  SavePolicyOptions o;
  o.every_steps = 10;
  o.async = true;
  SavePolicy policy(o, 0);
  EXPECT_EQ(policy.at_step_end(3, 100, /*stopping=*/true, false, 2), SaveKind::kBlocking);
  EXPECT_EQ(policy.at_step_end(100, 100, /*stopping=*/true, false, 99), SaveKind::kBlocking);
  EXPECT_EQ(policy.at_step_end(10, 100, /*stopping=*/false, false, 9), SaveKind::kBackground);
  EXPECT_EQ(policy.at_step_end(100, 100, /*stopping=*/false, false, 99), SaveKind::kNone);
  o.async = false;
  EXPECT_EQ(SavePolicy(o, 0).at_step_end(10, 100, false, false, 9), SaveKind::kBlocking);
}

TEST(SavePolicy, DeadlineWhenAStopNoLongerFitsBeforeTheTimeLimit) {
  SavePolicyOptions o;
  o.job_end_time = 10'000;
  SavePolicy policy(o, 0);
  // Nothing saved yet: a stop needs 3 steps and 30 s.
  EXPECT_FALSE(policy.request(0, 10'000 - 37, /*step_seconds=*/2).deadline);
  EXPECT_TRUE(policy.request(0, 10'000 - 35, 2).deadline);
  // A save measured at 20 s: twice that more.
  policy.took(20);
  EXPECT_DOUBLE_EQ(policy.last_save_seconds(), 20);
  EXPECT_FALSE(policy.request(0, 10'000 - 77, 2).deadline);
  EXPECT_TRUE(policy.request(0, 10'000 - 75, 2).deadline);
  EXPECT_TRUE(policy.request(0, 10'100, 2).deadline);  // past the limit
  // No limit, no deadline.
  EXPECT_FALSE(SavePolicy({}, 0).request(0, 10'100, 2).deadline);
}

}  // namespace
}  // namespace hpctrain::train
