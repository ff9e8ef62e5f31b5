// preempt/time_limit.hpp: the ranks stop once less time is left than twice the last save, three
// steps and 30 s, and not a second before.
#include "preempt/time_limit.hpp"

#include <gtest/gtest.h>

namespace hpctrain::preempt {
namespace {

TEST(TimeLimit, NeedsTwiceTheLastSaveThreeStepsAndThirtySeconds) {
  EXPECT_DOUBLE_EQ(seconds_needed_to_stop(/*last_save_seconds=*/10, /*step_seconds=*/2), 56);
  EXPECT_DOUBLE_EQ(seconds_needed_to_stop(/*last_save_seconds=*/0, /*step_seconds=*/0), 30);
}

TEST(TimeLimit, StopsJustBelowTheNeedAndNotAtIt) {
  // Last save 10 s, steps of 2 s: 20 + 6 + 30 = 56 s.
  EXPECT_TRUE(time_limit_near(/*seconds_left=*/55.9, /*last_save_seconds=*/10, /*step_seconds=*/2));
  EXPECT_FALSE(time_limit_near(/*seconds_left=*/56, /*last_save_seconds=*/10, /*step_seconds=*/2));
}

TEST(TimeLimit, EachTermCountsAtItsBoundary) {
  // Only the save: 2 x 20 + 30 = 70 s.
  EXPECT_TRUE(time_limit_near(69.5, /*last_save_seconds=*/20, /*step_seconds=*/0));
  EXPECT_FALSE(time_limit_near(70.5, /*last_save_seconds=*/20, /*step_seconds=*/0));
  // Only the steps: 3 x 10 + 30 = 60 s.
  EXPECT_TRUE(time_limit_near(59.5, /*last_save_seconds=*/0, /*step_seconds=*/10));
  EXPECT_FALSE(time_limit_near(60.5, /*last_save_seconds=*/0, /*step_seconds=*/10));
  // Neither: the 30 s margin alone.
  EXPECT_TRUE(time_limit_near(29.5, /*last_save_seconds=*/0, /*step_seconds=*/0));
  EXPECT_FALSE(time_limit_near(30.5, /*last_save_seconds=*/0, /*step_seconds=*/0));
}

TEST(TimeLimit, PastTheLimitIsNear) {
  EXPECT_TRUE(time_limit_near(/*seconds_left=*/-5, /*last_save_seconds=*/1, /*step_seconds=*/1));
}

}  // namespace
}  // namespace hpctrain::preempt
