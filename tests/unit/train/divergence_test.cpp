// The divergence guard (runtime/train/divergence.hpp) over log windows: a non-finite loss in fp32
// and bf16, a spike past the factor once the history is known, and in fp16 the scaler skipping
// every step for the limit's steps in a row (and nothing else: overflow windows, growth).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "train/divergence.hpp"

namespace hpctrain::train {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Divergence, ANonFiniteLossInFp32OrBf16) {
  DivergenceGuard g({false, 0, 0});
  EXPECT_FALSE(g.watch(1, 10, 2.3, 1));
  const auto v = g.watch(11, 20, kNan, 1);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, "the loss is nan over steps 11-20");
  DivergenceGuard h({false, 0, 0});
  EXPECT_EQ(h.watch(5, 5, kInf, 1).value_or(""), "the loss is inf over step 5");
}

TEST(Divergence, ASpikeOnlyOnceTheHistoryIsKnown) {
  DivergenceGuard g({false, 10, 0});
  // The first windows set the history, however high (a loss starts high).
  EXPECT_FALSE(g.watch(1, 10, 50, 1));
  for (int64_t w = 1; w < 8; ++w) EXPECT_FALSE(g.watch(w * 10 + 1, w * 10 + 10, 1.0, 1));
  EXPECT_FALSE(g.watch(81, 90, 9.9, 1)) << "under 10x the median (1.0)";
  const auto v = g.watch(91, 100, 10.5, 1);
  ASSERT_TRUE(v);
  EXPECT_NE(v->find("spiked to 10.5 over steps 91-100"), std::string::npos) << *v;
  EXPECT_NE(v->find("resilience.loss_spike_factor = 10"), std::string::npos) << *v;
  // Off: no spike counts.
  DivergenceGuard off({false, 0, 0});
  for (int64_t w = 0; w < 8; ++w) EXPECT_FALSE(off.watch(w + 1, w + 1, 1.0, 1));
  EXPECT_FALSE(off.watch(9, 9, 1e9, 1));
}

TEST(Divergence, Fp16EveryStepSkippedForTheLimit) {
  DivergenceGuard g({true, 0, 25});
  double scale = 65536;
  EXPECT_FALSE(g.watch(1, 10, 2.3, scale)) << "the first window sets the scale";
  // 10 steps, all skipped: the scale is 2^-10 of the one before. 20 in a row: under the limit.
  scale /= 1024;
  EXPECT_FALSE(g.watch(11, 20, kNan, scale)) << "a non-finite loss is the scaler's in fp16";
  scale /= 1024;
  EXPECT_FALSE(g.watch(21, 30, kNan, scale));
  scale /= 1024;
  const auto v = g.watch(31, 40, kNan, scale);
  ASSERT_TRUE(v);
  EXPECT_NE(v->find("skipped every step for 30 steps in a row (through step 40"), std::string::npos)
      << *v;
  EXPECT_EQ(g.offending_from(31, 40), 11) << "the streak's first step, not the window's";
  g.rolled_back();
  EXPECT_EQ(g.offending_from(31, 40), 31) << "no streak: the window's";
}

TEST(Divergence, Fp16OverflowsAndGrowthAreNotDivergence) {
  DivergenceGuard g({true, 0, 15});
  double scale = 1 << 24;
  EXPECT_FALSE(g.watch(1, 10, 2.3, scale));
  for (int64_t w = 1; w < 20; ++w) {
    // 9 of the 10 steps skipped, then one taken: the streak starts again every window.
    scale /= 512;
    EXPECT_FALSE(g.watch(w * 10 + 1, w * 10 + 10, 2.3, scale)) << w;
    scale *= 512;  // and grows back
    EXPECT_FALSE(g.watch(w * 10 + 1, w * 10 + 10, 2.3, scale)) << w;
  }
  // A scale that reached 0 and stays there skips on.
  DivergenceGuard z({true, 0, 4});
  EXPECT_FALSE(z.watch(1, 2, 2.3, 1e-300));
  EXPECT_FALSE(z.watch(3, 4, kNan, 0));
  EXPECT_TRUE(z.watch(5, 6, kNan, 0));
}

}  // namespace
}  // namespace hpctrain::train
