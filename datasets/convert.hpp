// Converters from common image-dataset formats into the hpctrain HDF5 layout
// (docs/dataset-format.md), and the validator behind `hpctrain-data inspect`.
// Each converter validates its input before writing, reports progress on `log` when asked, and
// returns a summary; errors are rt::DataError naming the offending input file.
// Thread safety: independent calls may run concurrently on different files.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "data/format.hpp"

namespace hpctrain::datasets {

struct ConvertOptions {
  int64_t chunk_images = 0;              // 0: the format's default
  std::vector<std::string> class_names;  // empty: from the input, or "0", "1", ...
  std::ostream* progress = nullptr;      // progress bar and summary; nullptr: silent
};

struct ConvertSummary {
  std::string output;
  data::DatasetInfo info;
  std::vector<int64_t> class_counts;
  double seconds = 0;
};

// MNIST-style IDX files (ubyte, gzip or plain): images [N, rows, cols], labels [N].
ConvertSummary convert_idx(const std::string& images_path, const std::string& labels_path,
                           const std::string& output, const ConvertOptions& options);

// CIFAR-10 binary batches (data_batch_*.bin, test_batch.bin): 1 label byte + 3x32x32 planar RGB
// per record. Class names come from batches.meta.txt next to the first file when present.
ConvertSummary convert_cifar10(const std::vector<std::string>& batch_files,
                               const std::string& output, const ConvertOptions& options);

// root/class_name/*.{jpg,jpeg,png,bmp,gif,tga,ppm,pgm}: decoded with stb_image, the shorter side
// resized to `size` and the center size x size kept. Classes are the sorted subdirectory names.
ConvertSummary convert_image_folder(const std::string& root, const std::string& output,
                                    int64_t size, int64_t channels, const ConvertOptions& options);

// Prints a summary of each converter run.
void print_summary(std::ostream& out, const ConvertSummary& summary);

// Validates one file against the format (optionally reading every image) and prints its summary.
// Throws rt::DataError on the first problem.
void inspect(const std::string& path, bool read_all, bool file_locking, std::ostream& out);

// The ten Fashion-MNIST class names, in label order.
std::vector<std::string> fashion_mnist_classes();

}  // namespace hpctrain::datasets
