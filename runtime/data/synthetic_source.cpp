// ImageSource::synthetic() (data/source.hpp): random images with random labels, held in memory,
// a pure function of the seed ([data] synthetic: benchmarks and smoke tests without a dataset).
// Served as one cached file, so every read path treats it as it treats a small dataset.

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "data/file_reader.hpp"
#include "data/rng.hpp"
#include "data/source.hpp"

namespace hpctrain::data {

std::shared_ptr<ImageSource> ImageSource::synthetic(int64_t num_samples, int64_t side,
                                                    int64_t channels, int64_t num_classes,
                                                    uint64_t seed) {
  if (num_samples < 1 || side < 1 || side > kMaxSide || channels < 1 || channels > kMaxChannels ||
      num_classes < 1 || num_classes > kMaxClasses) {
    HPCTRAIN_THROW(rt::DataError, "synthetic data: invalid shape " + std::to_string(num_samples) +
                                      " x " + std::to_string(side) + "x" + std::to_string(side) +
                                      "x" + std::to_string(channels) + ", " +
                                      std::to_string(num_classes) + " classes");
  }
  std::shared_ptr<ImageSource> src(new ImageSource());
  DatasetInfo& info = src->info_;
  info.num_samples = num_samples;
  info.height = info.width = side;
  info.channels = channels;
  info.num_classes = num_classes;
  for (int64_t k = 0; k < num_classes; ++k) info.class_names.push_back("class" + std::to_string(k));
  // Uniform bytes: mean 127.5 / 255, std sqrt((256^2 - 1) / 12) / 255.
  info.mean.assign(static_cast<size_t>(channels), 0.5);
  info.std.assign(static_cast<size_t>(channels), 0.28868);
  auto handle = std::make_unique<Handle>();
  handle->path = "synthetic";
  handle->sample_bytes = info.sample_bytes();
  handle->cache.resize(static_cast<size_t>(num_samples * info.sample_bytes()));
  SplitMix64 pixels(derive_key(seed, kSyntheticDomain));
  for (size_t i = 0; i < handle->cache.size(); i += 8) {
    const uint64_t r = pixels.next();
    std::memcpy(handle->cache.data() + i, &r, std::min<size_t>(8, handle->cache.size() - i));
  }
  SplitMix64 labels(derive_key(seed, kSyntheticDomain, 1));
  for (int64_t i = 0; i < num_samples; ++i) {
    src->labels_.push_back(static_cast<int64_t>(labels.below(static_cast<uint64_t>(num_classes))));
  }
  SourceFile file;
  file.path = handle->path;
  file.count = num_samples;
  file.cached = true;
  src->files_.push_back(file);
  src->handles_.push_back(std::move(handle));
  return src;
}

}  // namespace hpctrain::data
