// Sharding invariants and resume semantics of plan_shard (sampler.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/error.hpp"
#include "data/rng.hpp"
#include "data/sampler.hpp"

namespace hpctrain::data {
namespace {

TEST(Rng, PinnedOutputIsPortable) {
  // SplitMix64's published first outputs for seed 0; a change here would reshuffle every run.
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.next(), 0x06c45d188009454fULL);
}

TEST(Rng, BelowIsInRangeAndCoversIt) {
  SplitMix64 rng(7);
  std::vector<int> seen(13, 0);
  for (int i = 0; i < 13000; ++i) {
    const uint64_t v = rng.below(13);
    ASSERT_LT(v, 13u);
    ++seen[v];
  }
  for (int s : seen) EXPECT_GT(s, 800);  // ~1000 each
}

TEST(EpochOrder, IsAPermutationThatDependsOnSeedAndEpoch) {
  const auto a = epoch_order(1000, 1, 0, true);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_NE(a, epoch_order(1000, 2, 0, true));
  EXPECT_NE(a, epoch_order(1000, 1, 1, true));
  EXPECT_EQ(a, epoch_order(1000, 1, 0, true));
  const auto id = epoch_order(10, 1, 0, false);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(id[i], i);
}

TEST(EpochOrder, PinnedPermutation) {
  // Regression pin: the order must not change between builds or standard libraries.
  const std::vector<int64_t> expected = epoch_order(10, 42, 3, true);
  const std::vector<int64_t> again = epoch_order(10, 42, 3, true);
  EXPECT_EQ(expected, again);
  EXPECT_EQ(expected, (std::vector<int64_t>{5, 8, 3, 7, 6, 1, 2, 9, 0, 4}));
}

// The invariants DistributedSampler gives, checked over a grid of cases.
TEST(PlanShard, InvariantsOverManyCases) {
  for (int64_t n : {1, 2, 3, 7, 10, 64, 100, 257}) {
    for (int64_t world : {1, 2, 3, 4, 8, 16}) {
      for (uint64_t seed : {0ULL, 5ULL}) {
        for (int64_t epoch : {0, 3}) {
          for (TailPolicy tail : {TailPolicy::kDrop, TailPolicy::kPad}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " world=" + std::to_string(world) +
                         " seed=" + std::to_string(seed) + " epoch=" + std::to_string(epoch) +
                         (tail == TailPolicy::kDrop ? " drop" : " pad"));
            const auto order = epoch_order(n, seed, epoch, true);
            const int64_t expect_per_rank =
                tail == TailPolicy::kDrop ? n / world : (n + world - 1) / world;
            std::map<int64_t, int> count;
            for (int64_t r = 0; r < world; ++r) {
              const auto plan = plan_shard(n, seed, epoch, true, tail, world, r, 0);
              ASSERT_EQ(plan.per_rank, expect_per_rank);
              ASSERT_EQ(static_cast<int64_t>(plan.indices.size()), expect_per_rank);
              for (size_t j = 0; j < plan.indices.size(); ++j) {
                // torch's strided split of the (padded) order.
                const int64_t pos = r + world * static_cast<int64_t>(j);
                ASSERT_EQ(plan.indices[j], order[pos % n]);
                ++count[plan.indices[j]];
              }
            }
            if (tail == TailPolicy::kDrop) {
              // Disjoint, and exactly the first per_rank*world of the order.
              ASSERT_EQ(static_cast<int64_t>(count.size()), expect_per_rank * world);
              for (auto [idx, c] : count) ASSERT_EQ(c, 1) << idx;
              for (int64_t p = 0; p < expect_per_rank * world; ++p) ASSERT_EQ(count[order[p]], 1);
            } else {
              // Union is everything; only the pad repeats, taken from the start of the order.
              ASSERT_EQ(static_cast<int64_t>(count.size()), n);
              const int64_t pad = expect_per_rank * world - n;
              int64_t extra = 0;
              for (auto [idx, c] : count) extra += c - 1;
              ASSERT_EQ(extra, pad);
              for (int64_t p = 0; p < pad; ++p) ASSERT_GE(count[order[p % n]], 2);
            }
          }
        }
      }
    }
  }
}

// Simulates training steps: all ranks take per-rank batches of b; returns the set of samples
// consumed, in the order positions advance.
std::vector<int64_t> run_steps(int64_t n, uint64_t seed, int64_t epoch, TailPolicy tail,
                               int64_t world, int64_t b, int64_t consumed, int64_t steps,
                               int64_t* consumed_out) {
  std::vector<ShardPlan> plans;
  for (int64_t r = 0; r < world; ++r) {
    plans.push_back(plan_shard(n, seed, epoch, true, tail, world, r, consumed));
  }
  std::vector<int64_t> got;
  const int64_t per_rank = plans[0].per_rank;
  int64_t taken = 0;
  for (int64_t s = 0; s < steps && taken < per_rank; ++s) {
    const int64_t size = std::min(b, per_rank - taken);
    for (int64_t r = 0; r < world; ++r) {
      for (int64_t j = taken; j < taken + size; ++j) got.push_back(plans[r].indices[j]);
    }
    taken += size;
    consumed += size * world;
  }
  *consumed_out = consumed;
  return got;
}

TEST(PlanShard, ConsumedIsAPrefixOfTheOrder) {
  const int64_t n = 103, world = 4, b = 5;
  const auto order = epoch_order(n, 9, 2, true);
  for (int64_t steps = 0; steps <= 5; ++steps) {
    int64_t consumed = 0;
    auto got = run_steps(n, 9, 2, TailPolicy::kDrop, world, b, 0, steps, &consumed);
    ASSERT_EQ(consumed, steps * b * world);
    std::sort(got.begin(), got.end());
    std::vector<int64_t> prefix(order.begin(), order.begin() + consumed);
    std::sort(prefix.begin(), prefix.end());
    EXPECT_EQ(got, prefix);
  }
}

// Resume from every reachable position, at the same and at other world sizes: the union of what
// is read after the resume is exactly the not-yet-consumed part (minus what the new world size
// drops), with no repeats.
TEST(PlanShard, ResumeFromEveryPositionAtAnyWorldSize) {
  const uint64_t seed = 11;
  const int64_t epoch = 1;
  for (int64_t n : {37, 100}) {
    const auto order = epoch_order(n, seed, epoch, true);
    for (int64_t w1 : {1, 2, 3, 4}) {
      for (int64_t b : {1, 3, 8}) {
        const int64_t per_rank = n / w1;
        for (int64_t steps = 0; steps * b <= per_rank; ++steps) {
          int64_t c = 0;
          auto before = run_steps(n, seed, epoch, TailPolicy::kDrop, w1, b, 0, steps, &c);
          for (int64_t w2 : {1, 2, 3, 4, 5, 8}) {
            SCOPED_TRACE("n=" + std::to_string(n) + " w1=" + std::to_string(w1) +
                         " b=" + std::to_string(b) + " steps=" + std::to_string(steps) +
                         " w2=" + std::to_string(w2));
            int64_t end = 0;
            auto after = run_steps(n, seed, epoch, TailPolicy::kDrop, w2, b, c, 1 << 20, &end);
            const int64_t remaining = n - c;
            const int64_t kept = remaining / w2 * w2;
            ASSERT_EQ(static_cast<int64_t>(after.size()), kept);
            ASSERT_EQ(end, c + kept);
            std::vector<int64_t> expect(order.begin() + c, order.begin() + c + kept);
            auto sorted_after = after;
            std::sort(sorted_after.begin(), sorted_after.end());
            std::sort(expect.begin(), expect.end());
            ASSERT_EQ(sorted_after, expect);
            std::set<int64_t> all(before.begin(), before.end());
            for (int64_t s : after) ASSERT_TRUE(all.insert(s).second) << "repeated " << s;
            if (w2 == w1) {
              // Same world size: identical to never having stopped.
              int64_t full_end = 0;
              auto full =
                  run_steps(n, seed, epoch, TailPolicy::kDrop, w1, b, 0, 1 << 20, &full_end);
              std::vector<int64_t> joined = before;
              joined.insert(joined.end(), after.begin(), after.end());
              ASSERT_EQ(joined, full);
            }
          }
        }
      }
    }
  }
}

TEST(PlanShard, PadResumeAtSameWorldSizeMatchesUninterrupted) {
  const int64_t n = 50, world = 4, b = 3;
  int64_t full_end = 0;
  const auto full = run_steps(n, 3, 0, TailPolicy::kPad, world, b, 0, 1 << 20, &full_end);
  EXPECT_EQ(full_end, 52);
  for (int64_t steps = 0; steps <= 5; ++steps) {
    int64_t c = 0, end = 0;
    auto joined = run_steps(n, 3, 0, TailPolicy::kPad, world, b, 0, steps, &c);
    auto after = run_steps(n, 3, 0, TailPolicy::kPad, world, b, c, 1 << 20, &end);
    joined.insert(joined.end(), after.begin(), after.end());
    EXPECT_EQ(joined, full) << "steps=" << steps;
  }
  // A position at or past N ends the epoch.
  EXPECT_EQ(plan_shard(n, 3, 0, true, TailPolicy::kPad, world, 0, 52).per_rank, 0);
}

TEST(PlanShard, RejectsBadArguments) {
  EXPECT_THROW(plan_shard(0, 0, 0, true, TailPolicy::kDrop, 1, 0, 0), rt::DataError);
  EXPECT_THROW(plan_shard(10, 0, 0, true, TailPolicy::kDrop, 2, 2, 0), rt::DataError);
  EXPECT_THROW(plan_shard(10, 0, 0, true, TailPolicy::kDrop, 2, 0, -1), rt::DataError);
}

}  // namespace
}  // namespace hpctrain::data
