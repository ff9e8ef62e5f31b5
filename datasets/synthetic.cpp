// hpctrain-data synthetic: random images with random labels in the dataset layout, for benchmarks
// of the HDF5 path (bench/train) and tests that need a file of a given size. Each sample's pixels
// and label are a pure function of (seed, index), so the same command writes the same file.
#include <chrono>

#include "common/error.hpp"
#include "convert.hpp"
#include "convert_common.hpp"
#include "data/rng.hpp"
#include "progress.hpp"

namespace hpctrain::datasets {

ConvertSummary convert_synthetic(int64_t samples, int64_t size, int64_t channels, int64_t classes,
                                 uint64_t seed, const std::string& output,
                                 const ConvertOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (samples < 1 || size < 1 || size > data::kMaxSide || channels < 1 ||
      channels > data::kMaxChannels || classes < 1 || classes > data::kMaxClasses) {
    HPCTRAIN_THROW(rt::DataError, "synthetic: invalid " + std::to_string(samples) + " x " +
                                      std::to_string(size) + "x" + std::to_string(size) + "x" +
                                      std::to_string(channels) + ", " + std::to_string(classes) +
                                      " classes");
  }
  const auto names = options.class_names.empty() ? numbered_classes(classes) : options.class_names;
  DatasetWriter writer(output, samples, size, size, channels, names, {options.chunk_images});
  Progress progress(options.progress, "synthetic", samples);
  const int64_t sample_bytes = size * size * channels;
  BlockWriter out(writer, sample_bytes,
                  /*block_images=*/std::max<int64_t>(1, (16 << 20) / sample_bytes), progress);
  for (int64_t i = 0; i < samples; ++i) {
    data::SplitMix64 rng(data::derive_key(seed, data::kSyntheticDomain, static_cast<uint64_t>(i)));
    uint8_t* dst = out.next_slot();
    for (int64_t b = 0; b < sample_bytes; ++b) dst[b] = static_cast<uint8_t>(rng.next() >> 56);
    out.add(static_cast<int64_t>(rng.below(static_cast<uint64_t>(classes))));
  }
  out.flush();
  return finish_conversion(writer, output, out.labels(), t0);
}

}  // namespace hpctrain::datasets
