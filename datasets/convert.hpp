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

// `hpctrain-data folder --jpeg`: an image folder into format version 2 (encoded JPEG samples),
// sharded and resumable.
struct JpegFolderOptions {
  std::string root;    // root/class_name/*, or a flat folder named by val_labels
  std::string output;  // prefix: PREFIX-00000-of-00012.h5 ...
  // JPEGs of 3 components no larger than this are stored as they are; other images (grayscale,
  // CMYK, PNG, larger ones) are decoded, resized so the longer side is at most max_side (0: not
  // resized), and encoded at `quality`.
  int64_t max_side = 0;
  int quality = 90;
  int64_t threads = 0;     // 0: every core
  int64_t shards = 0;      // number of output files; 0: from shard_size
  int64_t shard_size = 0;  // samples per file (before skips); 0 (with shards 0): 10,000
  // A flat folder (ImageNet's validation set): lines "FILE CLASS" (whitespace or a comma; a
  // header line "ImageId,..." skipped; FILE with or without its extension; CLASS the first word
  // of the rest). Classes come from class_names or classes_from (a folder whose sorted
  // subfolders are the classes, e.g. the training set's root).
  std::string val_labels;
  std::string classes_from;
  std::vector<std::string> class_names;
  std::ostream* progress = nullptr;
};

struct JpegFolderSummary {
  std::vector<std::string> outputs;             // every shard, in order
  int64_t shards_written = 0, shards_kept = 0;  // kept: finished by an earlier run
  int64_t inputs = 0, samples = 0, stored_as_is = 0, reencoded = 0;
  std::vector<std::pair<std::string, std::string>> skipped;  // file, why
  int64_t skipped_earlier = 0;            // in the shards kept (their skipped_inputs attribute)
  std::vector<std::string> empty_shards;  // every input skipped: no file written
  int64_t encoded_bytes = 0;              // of the shards written now
  double pixel_bytes = 0;                 // the same images decoded (height x width x 3)
  double seconds = 0;
  int64_t threads = 0;
};

JpegFolderSummary convert_jpeg_folder(const JpegFolderOptions& options);
void print_summary(std::ostream& out, const JpegFolderSummary& summary);

// `samples` random images (size x size x channels, uniform bytes) with random labels in
// [0, classes): for benchmarks of the HDF5 path. The same arguments write the same file.
ConvertSummary convert_synthetic(int64_t samples, int64_t size, int64_t channels, int64_t classes,
                                 uint64_t seed, const std::string& output,
                                 const ConvertOptions& options);

// Prints a summary of each converter run.
void print_summary(std::ostream& out, const ConvertSummary& summary);

// Validates one file against the format (optionally reading every image) and prints its summary.
// Throws rt::DataError on the first problem.
void inspect(const std::string& path, bool read_all, bool file_locking, std::ostream& out);

// The ten Fashion-MNIST class names, in label order.
std::vector<std::string> fashion_mnist_classes();

}  // namespace hpctrain::datasets
