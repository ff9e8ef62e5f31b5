// The writers of the hpctrain HDF5 image dataset layout (docs/dataset-format.md): DatasetWriter
// (version 1, pixels) and EncodedDatasetWriter (version 2, encoded JPEG samples), which every
// converter uses so there is exactly one place that produces each version, and PixelStats, the
// per-channel sums behind the mean/std attributes. The layout's names and limits, and the checks
// every reader applies, are runtime/data's (data/format.hpp), shared with the reader.
// Thread safety: a writer is single-threaded; PixelStats is a value type (merge() combines the
// sums of several threads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/format.hpp"

namespace hpctrain::datasets {

// Images per chunk when the caller does not choose: the largest count that keeps a chunk within
// kTargetChunkBytes (at least one image). Large because (measured, docs/dataset-format.md):
// HDF5 1.10 finds a chunk's address by scanning the chunk index, so mapping n chunks at open
// costs O(n^2) (50,000 one-image chunks: 20 s); our direct reads fetch single images whatever
// the chunk size; and chunks larger than HDF5's 1 MiB chunk cache let HDF5/h5py readers do
// partial reads instead of reading a whole chunk per random image.
inline constexpr int64_t kTargetChunkBytes = 4 * 1024 * 1024;
int64_t default_chunk_images(int64_t sample_bytes);

struct WriterOptions {
  int64_t chunk_images = 0;  // 0: default_chunk_images()
};

// Creates (truncating) one dataset file with a fixed number of samples, written in any order in
// ranges; finish() adds the statistics attributes and closes. A writer destroyed without finish()
// leaves an incomplete file that readers reject (missing mean/std).
class DatasetWriter {
 public:
  DatasetWriter(const std::string& path, int64_t num_samples, int64_t height, int64_t width,
                int64_t channels, std::vector<std::string> class_names,
                const WriterOptions& options = {});
  ~DatasetWriter();
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // images: count x height x width x channels uint8; labels: count values in [0, num_classes).
  void write(int64_t first, int64_t count, const uint8_t* images, const int64_t* labels);
  data::DatasetInfo finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Per-channel sums of pixel values (0..255) for a writer's mean/std attributes.
struct PixelStats {
  std::vector<double> sum, sum_sq;
  double pixels = 0;  // per channel
  void add(const uint8_t* pixels_hwc, int64_t count, int64_t channels, int64_t stride = 1);
  void merge(const PixelStats& other);
};

// Creates (truncating) one version-2 file of encoded (JPEG) samples. Samples are added in order,
// held in memory, and written at finish(), which knows the total size: /encoded is one
// contiguous, unfiltered byte array that readers pread directly. A writer destroyed without
// finish() writes nothing.
class EncodedDatasetWriter {
 public:
  EncodedDatasetWriter(std::string path, std::vector<std::string> class_names, int64_t channels,
                       std::string writer);
  ~EncodedDatasetWriter();
  EncodedDatasetWriter(const EncodedDatasetWriter&) = delete;
  EncodedDatasetWriter& operator=(const EncodedDatasetWriter&) = delete;

  // One sample: its encoded bytes and the decoded image's height and width. Throws
  // rt::DataError for an empty or oversized sample, a bad shape or a label outside the classes.
  void add(const uint8_t* bytes, size_t size, int64_t height, int64_t width, int64_t label);
  void add_stats(const PixelStats& stats);
  int64_t size() const;
  // Extra root attributes (integers, strings) written at finish(): the converter's plan.
  void set_attribute(const std::string& name, const std::string& value);
  void set_attribute(const std::string& name, int64_t value);
  data::DatasetInfo finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hpctrain::datasets
