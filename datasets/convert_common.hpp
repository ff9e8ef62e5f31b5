// Helpers shared by the converters: a gzip-or-plain file reader and the write loop.
// Thread safety: single-threaded objects.
#pragma once

#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "convert.hpp"
#include "dataset_writer.hpp"
#include "progress.hpp"

namespace hpctrain::datasets {

// Reads a file that may be gzip-compressed (zlib reads plain files through the same calls).
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Reads exactly `bytes` or throws rt::DataError naming the file and what was being read.
  void read(void* dst, size_t bytes, const char* what);
  // Reads up to `bytes`; returns how many (0 at end of file).
  size_t read_some(void* dst, size_t bytes);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

// Collects converted images into blocks and writes each full block (and, at flush(), the last
// partial one) to the dataset in order, keeping every label for the summary.
class BlockWriter {
 public:
  BlockWriter(DatasetWriter& writer, int64_t sample_bytes, int64_t block_images,
              Progress& progress);
  // Where the next image goes (sample_bytes), until add().
  uint8_t* next_slot();
  // Takes the image in next_slot() with its label; writes the block when it is full.
  void add(int64_t label);
  // Writes what is left.
  void flush();
  const std::vector<int64_t>& labels() const { return labels_; }

 private:
  DatasetWriter& writer_;
  int64_t sample_bytes_, block_images_;
  Progress& progress_;
  std::vector<uint8_t> block_;
  std::vector<int64_t> labels_, block_labels_;
  int64_t written_ = 0;
};

std::vector<std::string> numbered_classes(int64_t n);

// An image file by its extension (case-insensitive): jpg, jpeg, png, bmp, gif, tga, ppm, pgm.
bool is_image_file(const std::filesystem::path& p);

// Counts per class, for the summary.
std::vector<int64_t> count_classes(const std::vector<int64_t>& labels, int64_t num_classes);

// Finishes `writer` (statistics, close) and makes the summary every converter returns.
ConvertSummary finish_conversion(DatasetWriter& writer, const std::string& output,
                                 const std::vector<int64_t>& labels,
                                 std::chrono::steady_clock::time_point started);

}  // namespace hpctrain::datasets
