// Sharding of a global index space across ranks with DistributedSampler semantics, expressed so
// that an epoch can resume from any position, also at a different world size.
//
// An epoch has one order of all N samples: a permutation drawn from (seed, epoch) with our own
// SplitMix64 Fisher-Yates, or the identity when not shuffling. The position in the epoch is the
// number of samples of that order already consumed by all ranks together ("consumed"). From
// position c with world size W, the remaining samples order[c..N) are dealt round-robin: rank r
// takes the j-th remaining sample at r + W*j, so after k per-rank batches of b samples the ranks
// together have consumed exactly order[c, c + k*b*W) and the position advances by b*W per step.
// With c == 0 this is torch's DistributedSampler: drop keeps floor(N/W) per rank and discards
// the tail, pad keeps ceil(N/W) per rank and repeats samples from the start of the order.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec/choices.hpp"

namespace hpctrain::data {

// The spec's enumeration ([data] shard_tail; spec/choices.hpp holds the names).
using TailPolicy = spec::TailPolicy;

// The order of [0, n) in `epoch`.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, bool shuffle);

struct ShardPlan {
  std::vector<int64_t> indices;  // this rank's samples, in reading order
  int64_t consumed_begin = 0;    // the position the plan starts from
  int64_t per_rank = 0;          // indices.size(); the same on every rank
};

// The samples `rank` of `world_size` reads from position `consumed` to the end of the epoch.
// Throws rt::DataError on invalid arguments (consumed < 0, rank outside [0, world_size), ...).
ShardPlan plan_shard(int64_t num_samples, uint64_t seed, int64_t epoch, bool shuffle,
                     TailPolicy tail, int64_t world_size, int64_t rank, int64_t consumed);

}  // namespace hpctrain::data
