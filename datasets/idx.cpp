// IDX (MNIST, Fashion-MNIST) -> hpctrain HDF5. The IDX format is a big-endian header
// (0, 0, type, ndims, ndims x uint32 dims) followed by the data; we accept type 0x08 (ubyte).
#include <algorithm>
#include <chrono>

#include "common/error.hpp"
#include "convert.hpp"
#include "convert_common.hpp"
#include "progress.hpp"

namespace hpctrain::datasets {

namespace {

std::vector<int64_t> read_idx_header(InputFile& in, int expected_dims) {
  uint8_t magic[4];
  in.read(magic, 4, "the IDX magic number");
  if (magic[0] != 0 || magic[1] != 0) {
    HPCTRAIN_THROW(rt::DataError, in.path() + ": not an IDX file (bad magic number)");
  }
  if (magic[2] != 0x08) {
    HPCTRAIN_THROW(rt::DataError, in.path() + ": IDX element type 0x" + std::to_string(magic[2]) +
                                      " is not unsigned byte (0x08)");
  }
  if (magic[3] != expected_dims) {
    HPCTRAIN_THROW(rt::DataError, in.path() + ": IDX file has " + std::to_string(magic[3]) +
                                      " dimensions, expected " + std::to_string(expected_dims));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < expected_dims; ++i) {
    uint8_t b[4];
    in.read(b, 4, "the IDX dimensions");
    dims.push_back((int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3]);
  }
  return dims;
}

}  // namespace

ConvertSummary convert_idx(const std::string& images_path, const std::string& labels_path,
                           const std::string& output, const ConvertOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  InputFile labels_in(labels_path);
  const int64_t n = read_idx_header(labels_in, 1)[0];
  InputFile images_in(images_path);
  const auto dims = read_idx_header(images_in, 3);
  if (dims[0] != n) {
    HPCTRAIN_THROW(rt::DataError, images_path + ": " + std::to_string(dims[0]) + " images but " +
                                      labels_path + " has " + std::to_string(n) + " labels");
  }
  if (n < 1 || n > data::kMaxSamples || dims[1] < 1 || dims[1] > data::kMaxSide || dims[2] < 1 ||
      dims[2] > data::kMaxSide) {
    HPCTRAIN_THROW(rt::DataError, images_path + ": IDX dimensions " + std::to_string(n) + "x" +
                                      std::to_string(dims[1]) + "x" + std::to_string(dims[2]) +
                                      " are out of range");
  }
  std::vector<uint8_t> raw_labels(static_cast<size_t>(n));
  labels_in.read(raw_labels.data(), raw_labels.size(), "the labels");
  std::vector<int64_t> labels(raw_labels.begin(), raw_labels.end());
  const int64_t max_label = *std::max_element(labels.begin(), labels.end());
  std::vector<std::string> names = options.class_names;
  if (names.empty()) names = numbered_classes(max_label + 1);
  if (max_label >= static_cast<int64_t>(names.size())) {
    HPCTRAIN_THROW(rt::DataError, labels_path + ": label " + std::to_string(max_label) +
                                      " but only " + std::to_string(names.size()) + " class names");
  }

  const int64_t h = dims[1], w = dims[2];
  DatasetWriter writer(output, n, h, w, /*channels=*/1, names, {options.chunk_images});
  Progress progress(options.progress, "idx", n);
  constexpr int64_t kBlock = 4096;
  std::vector<uint8_t> block(static_cast<size_t>(kBlock * h * w));
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t count = std::min(kBlock, n - first);
    images_in.read(block.data(), static_cast<size_t>(count * h * w), "the images");
    writer.write(first, count, block.data(), labels.data() + first);
    progress.update(first + count);
  }
  return finish_conversion(writer, output, labels, t0);
}

}  // namespace hpctrain::datasets
