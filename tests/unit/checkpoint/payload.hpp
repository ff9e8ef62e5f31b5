// Checkpoint payloads for the store's tests: each rank's files of a step are a pure function of
// (seed, step, rank), so a checker can recompute what any committed step must hold.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/store.hpp"

namespace hpctrain::checkpoint::test {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline std::string random_bytes(uint64_t seed, size_t size) {
  std::string bytes(size, '\0');
  uint64_t state = seed;
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t word = splitmix64(state);
    for (size_t b = 0; b < 8 && i + b < size; ++b)
      bytes[i + b] = static_cast<char>(word >> (8 * b));
  }
  return bytes;
}

// Rank 0: "model.bin" and "state.json" (the replicated state); every rank: "rng-R.bin". Sizes
// vary with the step: model.bin between max_bytes / 2 and max_bytes, rng-R.bin up to a quarter
// of that (and may be empty).
inline Part make_part(uint64_t seed, int64_t step, int rank, size_t max_bytes = 4096) {
  uint64_t state =
      seed * 1000003 + static_cast<uint64_t>(step) * 7919 + static_cast<uint64_t>(rank);
  // One draw a statement: the order of a call's arguments is unspecified.
  auto draw_bytes = [&state](size_t min, size_t max) {
    const uint64_t content = splitmix64(state);
    const size_t size = min + splitmix64(state) % (max - min + 1);
    return random_bytes(content, size);
  };
  Part part;
  if (rank == 0) {
    part.files["model.bin"] = draw_bytes(max_bytes / 2, max_bytes);
    part.files["state.json"] = "{\"step\":" + std::to_string(step) + "}";
  }
  part.files["rng-" + std::to_string(rank) + ".bin"] = draw_bytes(0, max_bytes / 4);
  return part;
}

// What rank `rank` reads back: its own files and rank 0's replicated ones.
inline std::map<std::string, std::string> expected_files(uint64_t seed, int64_t step, int rank,
                                                         size_t max_bytes = 4096) {
  auto files = make_part(seed, step, rank, max_bytes).files;
  if (rank != 0) {
    for (auto& [name, bytes] : make_part(seed, step, 0, max_bytes).files) {
      if (name.rfind("rng-", 0) != 0) files[name] = bytes;
    }
  }
  return files;
}

inline const std::vector<std::string>& shared_files() {
  static const std::vector<std::string> kShared = {"model.bin", "state.json"};
  return kShared;
}

}  // namespace hpctrain::checkpoint::test
