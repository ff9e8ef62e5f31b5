// Version 1 of the hpctrain HDF5 image dataset layout (docs/dataset-format.md): names, limits,
// the summary a reader extracts (DatasetInfo), and DatasetWriter, which every converter uses so
// there is exactly one place that produces the layout.
// Thread safety: DatasetWriter is single-threaded; DatasetInfo is a value type.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain::data {

inline constexpr char kFormatName[] = "hpctrain-images";
inline constexpr int64_t kFormatVersion = 1;
inline constexpr char kImagesName[] = "images";
inline constexpr char kLabelsName[] = "labels";

// Limits a reader enforces before allocating anything sized by the file, so a damaged or hostile
// header cannot make a rank allocate terabytes.
inline constexpr int64_t kMaxSide = 16384;
inline constexpr int64_t kMaxChannels = 4;
inline constexpr int64_t kMaxClasses = 1 << 20;
inline constexpr int64_t kMaxSamples = int64_t{1} << 36;

// Images per chunk when the caller does not choose: the largest count that keeps a chunk within
// kTargetChunkBytes (at least one image). Large because (measured, docs/dataset-format.md):
// HDF5 1.10 finds a chunk's address by scanning the chunk index, so mapping n chunks at open
// costs O(n^2) (50,000 one-image chunks: 20 s); our direct reads fetch single images whatever
// the chunk size; and chunks larger than HDF5's 1 MiB chunk cache let HDF5/h5py readers do
// partial reads instead of reading a whole chunk per random image.
inline constexpr int64_t kTargetChunkBytes = 4 * 1024 * 1024;
int64_t default_chunk_images(int64_t sample_bytes);

struct DatasetInfo {
  int64_t num_samples = 0;
  int64_t height = 0, width = 0, channels = 0;
  int64_t num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<double> mean, std;  // per channel, on the [0, 1] pixel scale
  int64_t chunk_images = 0;       // of the first file; informational

  int64_t sample_bytes() const { return height * width * channels; }
};

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
  DatasetInfo finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace hpctrain::data
