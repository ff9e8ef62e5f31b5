// Portable random numbers for the data pipeline: SplitMix64 (Steele, Lea & Flood, 2014) as both a
// stream generator and a counter-based hash, plus unbiased bounded integers.
//
// Why our own: std::shuffle and std::uniform_int_distribution produce different sequences on
// libstdc++ and libc++, and a run must shuffle identically on every node and after a rebuild.
// Every random choice in the pipeline is a pure function of (seed, epoch, sample index, domain),
// so results do not depend on thread count or scheduling and survive a resume.
// Thread safety: SplitMix64 objects are not shared; create one per use (construction is cheap).
#pragma once

#include <cmath>
#include <cstdint>

namespace hpctrain::data {

// The SplitMix64 output function: a bijective 64-bit mixer with good avalanche.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Hashes a tuple of words into one key; feeding each word through the mixer makes (a, b) and
// (b, a) distinct keys.
constexpr uint64_t derive_key(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  uint64_t h = mix64(a + kGolden);
  h = mix64(h ^ (b + 2 * kGolden));
  h = mix64(h ^ (c + 3 * kGolden));
  return mix64(h ^ (d + 4 * kGolden));
}

// Domains keep the streams for different purposes independent under the same seed.
constexpr uint64_t kPermutationDomain = 0x7065726d;  // "perm"
constexpr uint64_t kAugmentDomain = 0x61756720;      // "aug "
constexpr uint64_t kSyntheticDomain = 0x73796e74;    // "synt"

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix64(state_);
  }

  // Uniform in [0, n), n > 0, without modulo bias: reject the low values that would make the
  // last partial copy of [0, n) over-represented.
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // == 2^64 mod n
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

  // Uniform integer in [lo, hi], lo <= hi.
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform double in [0, 1) from the top 53 bits, exactly representable.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

 private:
  uint64_t state_;
};

}  // namespace hpctrain::data
