#include "data/sampler.hpp"

#include <numeric>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "data/rng.hpp"

namespace hpctrain::data {

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, bool shuffle) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!shuffle) return order;
  SplitMix64 rng(derive_key(seed, static_cast<uint64_t>(epoch), kPermutationDomain));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

ShardPlan plan_shard(int64_t num_samples, uint64_t seed, int64_t epoch, bool shuffle,
                     TailPolicy tail, int64_t world_size, int64_t rank, int64_t consumed) {
  if (num_samples < 1 || world_size < 1 || rank < 0 || rank >= world_size || consumed < 0 ||
      epoch < 0) {
    HPCTRAIN_THROW(rt::DataError,
                   "invalid shard request: num_samples=" + std::to_string(num_samples) +
                       " world_size=" + std::to_string(world_size) +
                       " rank=" + std::to_string(rank) + " consumed=" + std::to_string(consumed) +
                       " epoch=" + std::to_string(epoch));
  }
  ShardPlan plan;
  plan.consumed_begin = consumed;
  // A position past N can only be inside the padded tail, which ends the epoch.
  const int64_t remaining = consumed < num_samples ? num_samples - consumed : 0;
  plan.per_rank = tail == TailPolicy::kDrop ? remaining / world_size
                                            : (remaining + world_size - 1) / world_size;
  if (plan.per_rank == 0) return plan;
  const std::vector<int64_t> order = epoch_order(num_samples, seed, epoch, shuffle);
  plan.indices.reserve(static_cast<size_t>(plan.per_rank));
  for (int64_t j = 0; j < plan.per_rank; ++j) {
    const int64_t pos = rank + world_size * j;
    // Padding repeats the order from its start (cyclically when the pad exceeds N, as torch does).
    const int64_t at = pos < remaining ? consumed + pos : (pos - remaining) % num_samples;
    plan.indices.push_back(order[static_cast<size_t>(at)]);
  }
  return plan;
}

}  // namespace hpctrain::data
