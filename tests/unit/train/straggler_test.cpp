// The straggler verdicts (train/straggler.hpp): the log window's (the slowest rank against the
// ranks' median, 1.5 times and 5 ms), and resilience.evict_stragglers' (the lower median, the
// ratio and the 20 ms margin, the windows in a row).
#include "train/straggler.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::train {
namespace {

using Busy = std::map<std::string, double>;

// The verdict of a watch that needs one window.
std::optional<StragglerVerdict> at_once(const Busy& busy, double ratio = 1.5) {
  StragglerWatch watch(ratio, /*windows=*/1);
  return watch.observe(busy);
}

TEST(RankSpread, NamesTheSlowestRankAndTheMedian) {
  const RankSpread s = compare_ranks({0.011, 0.0106, 0.061});
  EXPECT_EQ(s.slowest, 2);
  EXPECT_DOUBLE_EQ(s.slowest_s, 0.061);
  EXPECT_DOUBLE_EQ(s.median_s, 0.011);
  EXPECT_TRUE(s.behind) << "5.5x and 50 ms";
}

// Both conditions hold or the slowest is not behind: more than 1.5 times the median, and more
// than 5 ms above it.
TEST(RankSpread, BehindIsOneAndAHalfTimesAndFiveMilliseconds) {
  EXPECT_FALSE(compare_ranks({0.002, 0.002, 0.006}).behind) << "3x, but 4 ms";
  EXPECT_TRUE(compare_ranks({0.002, 0.002, 0.008}).behind) << "4x and 6 ms";
  EXPECT_FALSE(compare_ranks({0.100, 0.100, 0.150}).behind) << "50 ms, but 1.5x exactly";
  EXPECT_TRUE(compare_ranks({0.100, 0.100, 0.151}).behind) << "51 ms and 1.51x";
  EXPECT_DOUBLE_EQ(RankSpread::kBehindRatio, 1.5);
  EXPECT_DOUBLE_EQ(RankSpread::kBehindMarginS, 0.005);
}

// An even count of ranks takes the upper median: with two ranks the slower one's own time, so
// two ranks never name a straggler; with four, the third fastest.
TEST(RankSpread, EvenCountsTakeTheUpperMedian) {
  const RankSpread two = compare_ranks({0.010, 0.100});
  EXPECT_DOUBLE_EQ(two.median_s, 0.100);
  EXPECT_EQ(two.slowest, 1);
  EXPECT_FALSE(two.behind);
  const RankSpread four = compare_ranks({0.010, 0.010, 0.020, 0.050});
  EXPECT_DOUBLE_EQ(four.median_s, 0.020);
  EXPECT_TRUE(four.behind) << "2.5x the upper median 0.020 s";
  EXPECT_FALSE(compare_ranks({0.010, 0.010, 0.040, 0.050}).behind) << "1.25x of 0.040 s";
}

TEST(RankSpread, EqualRanksNameTheFirstAndNobodyBehind) {
  const RankSpread s = compare_ranks({0.5, 0.7, 0.7});
  EXPECT_EQ(s.slowest, 1);
  EXPECT_FALSE(s.behind);
  EXPECT_FALSE(compare_ranks({0.0, 0.0, 0.1}).behind) << "a median of 0 compares with nothing";
}

TEST(RankSpread, OneRankIsNeverBehind) {
  const RankSpread one = compare_ranks({9.0});
  EXPECT_EQ(one.slowest, 0);
  EXPECT_FALSE(one.behind);
  EXPECT_FALSE(compare_ranks({}).behind);
}

TEST(Straggler, NodeBusyIsItsSlowestRank) {
  const auto busy = node_busy_times({"n1", "n1", "n2", "n2", "n3"}, {0.01, 0.03, 0.02, 0.02, 0.5});
  EXPECT_EQ(busy, (Busy{{"n1", 0.03}, {"n2", 0.02}, {"n3", 0.5}}));
}

// With an even count of nodes the two medians differ; the verdict takes the lower one, since half
// the nodes may be slow. Each case evicts with the lower median and would not with the upper.
TEST(Straggler, TwoNodesCompareWithTheFasterOne) {
  const auto v = at_once({{"n1", 0.010}, {"n2", 0.040}});
  ASSERT_TRUE(v) << "upper median 0.040 s taken";
  EXPECT_EQ(v->node, "n2");
  EXPECT_DOUBLE_EQ(v->busy_s, 0.040);
  EXPECT_DOUBLE_EQ(v->median_s, 0.010);
  EXPECT_EQ(v->windows, 1);
}

TEST(Straggler, FourNodesTakeTheLowerMedian) {
  const auto v = at_once({{"n1", 0.010}, {"n2", 0.010}, {"n3", 0.050}, {"n4", 0.060}});
  ASSERT_TRUE(v) << "upper median 0.050 s taken";
  EXPECT_EQ(v->node, "n4");
  EXPECT_DOUBLE_EQ(v->median_s, 0.010);
}

TEST(Straggler, SixNodesTakeTheLowerMedian) {
  const auto v =
      at_once({{"a", 0.010}, {"b", 0.010}, {"c", 0.010}, {"d", 0.070}, {"e", 0.070}, {"f", 0.090}});
  ASSERT_TRUE(v) << "upper median 0.070 s taken";
  EXPECT_EQ(v->node, "f");
  EXPECT_DOUBLE_EQ(v->median_s, 0.010);
}

TEST(Straggler, OddCountTakesTheMiddleNode) {
  const auto v = at_once({{"n1", 0.010}, {"n2", 0.050}, {"n3", 0.090}});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->node, "n3");
  EXPECT_DOUBLE_EQ(v->median_s, 0.050);
  // 0.070 is 1.4x the middle node's 0.050: not behind.
  EXPECT_FALSE(at_once({{"n1", 0.010}, {"n2", 0.050}, {"n3", 0.070}}));
}

// Both conditions hold or nothing is behind: the ratio, and 20 ms above the median.
TEST(Straggler, TwentyMillisecondsAboveTheMedian) {
  EXPECT_FALSE(at_once({{"n1", 0.010}, {"n2", 0.029}})) << "2.9x, but 19 ms";
  EXPECT_TRUE(at_once({{"n1", 0.010}, {"n2", 0.031}})) << "3.1x and 21 ms";
  EXPECT_FALSE(at_once({{"n1", 0.100}, {"n2", 0.140}})) << "40 ms, but 1.4x";
  EXPECT_TRUE(at_once({{"n1", 0.100}, {"n2", 0.160}})) << "60 ms and 1.6x";
  EXPECT_FALSE(at_once({{"n1", 0.100}, {"n2", 0.160}}, /*ratio=*/2.0)) << "1.6x of 2";
  EXPECT_DOUBLE_EQ(StragglerWatch::kMarginS, 0.020);
}

TEST(Straggler, EvenlySlowRunEvictsNothing) {
  EXPECT_FALSE(at_once({{"n1", 0.5}, {"n2", 0.5}, {"n3", 0.5}}));
  EXPECT_FALSE(at_once({{"n1", 0.0}, {"n2", 0.0}}));
}

TEST(Straggler, OneNodeComparesWithNothing) {
  EXPECT_FALSE(at_once({{"n1", 9.0}}));
  EXPECT_FALSE(at_once({}));
}

const Busy kN2Behind{{"n1", 0.010}, {"n2", 0.100}, {"n3", 0.011}};
const Busy kN3Behind{{"n1", 0.010}, {"n2", 0.011}, {"n3", 0.100}};
const Busy kNobody{{"n1", 0.010}, {"n2", 0.011}, {"n3", 0.012}};

TEST(Straggler, TheSameNodeForWindowsInARow) {
  StragglerWatch watch(1.5, /*windows=*/3);
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_EQ(watch.streak(), 1);
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_EQ(watch.streak(), 2);
  EXPECT_EQ(watch.behind(), "n2");
  const auto v = watch.observe(kN2Behind);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->node, "n2");
  EXPECT_EQ(v->windows, 3);
  EXPECT_DOUBLE_EQ(v->busy_s, 0.100);
  EXPECT_DOUBLE_EQ(v->median_s, 0.011);
}

TEST(Straggler, NobodyBehindStartsTheCountAgain) {
  StragglerWatch watch(1.5, /*windows=*/3);
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe(kNobody));
  EXPECT_EQ(watch.streak(), 0);
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_EQ(watch.streak(), 2);
  EXPECT_TRUE(watch.observe(kN2Behind));
}

TEST(Straggler, AnotherNodeBehindStartsTheCountAgain) {
  StragglerWatch watch(1.5, /*windows=*/3);
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe(kN3Behind));
  EXPECT_EQ(watch.streak(), 1);
  EXPECT_EQ(watch.behind(), "n3");
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe(kN2Behind));
  const auto v = watch.observe(kN2Behind);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->node, "n2");
}

// A window with fewer than two nodes' figures (the trainer's figures never are) changes nothing.
TEST(Straggler, AWindowOfOneNodeKeepsTheCount) {
  StragglerWatch watch(1.5, /*windows=*/2);
  EXPECT_FALSE(watch.observe(kN2Behind));
  EXPECT_FALSE(watch.observe({{"n2", 0.100}}));
  EXPECT_EQ(watch.streak(), 1);
  EXPECT_TRUE(watch.observe(kN2Behind));
}

// The ranks reach the verdict each on its own: equally slow nodes resolve the same way on all.
TEST(Straggler, EquallySlowNodesTakeTheFirstByName) {
  const auto v = at_once({{"n1", 0.010}, {"n2", 0.100}, {"n3", 0.100}, {"n4", 0.010}});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->node, "n2");
}

TEST(StragglerMonitor, EvictionNamesTheNodeItsRanksAndWhy) {
  StragglerMonitor monitor(/*evict=*/true, StragglerWatch(1.5, 2), {"a", "b", "b", "c"});
  const std::vector<double> p50 = {0.010, 0.012, 0.090, 0.011};
  EXPECT_FALSE(monitor.watch(p50));
  const auto e = monitor.watch(p50);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->node, "b");
  EXPECT_EQ(e->ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(e->message,
            "straggler: node b busy 0.090 s a step (its slowest rank's p50), 8.2x the nodes' "
            "median 0.011 s, for 2 log windows in a row");
}

TEST(StragglerMonitor, NoEvictionWithoutTheKeyOrWithoutOneHostPerRank) {
  const std::vector<double> p50 = {0.010, 0.090};
  StragglerMonitor off(/*evict=*/false, StragglerWatch(1.5, 1), {"a", "b"});
  EXPECT_FALSE(off.watch(p50));
  StragglerMonitor unknown(/*evict=*/true, StragglerWatch(1.5, 1), {});
  EXPECT_FALSE(unknown.watch(p50));
  EXPECT_FALSE(unknown.host(1));
  StragglerMonitor on(/*evict=*/true, StragglerWatch(1.5, 1), {"a", "b"});
  EXPECT_TRUE(on.watch(p50));
  EXPECT_EQ(on.host(1), "b");
  EXPECT_FALSE(on.host(2));
}

TEST(StragglerMonitor, OneRankComparesWithNothing) {
  StragglerMonitor monitor(false, StragglerWatch(1.5, 3), {"a"});
  EXPECT_FALSE(monitor.compare({0.5}));
  ASSERT_TRUE(monitor.compare({0.01, 0.5}));
}

}  // namespace
}  // namespace hpctrain::train
