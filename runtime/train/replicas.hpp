// What keeps the ranks' replicas of the model one model (data parallelism's invariant): rank 0's
// batch-norm statistics for everyone, the weights compared by fingerprint, a figure's maximum
// over the ranks.
// Thread safety: the training thread; every function but weights_fingerprint() is collective.
#pragma once

#include <cstdint>
#include <optional>

#include "dist/communicator.hpp"

namespace torch::nn {
class Module;
}

namespace hpctrain::train {

// FNV-1a over the bytes of every parameter and buffer in state-dict order: equal fingerprints
// mean bitwise equal weights.
uint64_t weights_fingerprint(const torch::nn::Module& model);

// Batch-norm statistics are computed on each rank's shard; rank 0's are the model's (as DDP's
// broadcast_buffers), so evaluation and the saved weights agree on every rank.
void sync_buffers(torch::nn::Module& model, dist::Communicator& comm);

// Every rank must hold the same weights: each rank hashes its parameters and buffers, says so on
// stderr ("final weights fnv1a64 0x..." or, with `evaluated_at`, "weights evaluated at step N
// fnv1a64 0x..."), and the ranks compare the hashes; a difference is an rt::Error naming the
// ranks that disagree with rank 0. Returns this rank's fingerprint.
uint64_t verify_identical_weights(const torch::nn::Module& model, dist::Communicator& comm,
                                  std::optional<int64_t> evaluated_at = std::nullopt);

// The largest of every rank's `value`.
double max_over_ranks(double value, dist::Communicator& comm);

}  // namespace hpctrain::train
