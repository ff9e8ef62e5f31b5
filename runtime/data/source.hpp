// ImageSource: one or more dataset files (docs/dataset-format.md) read as a single index space.
//
// Every file is validated when opened, before anything sized by the file is allocated, and each
// failure names the file and the HDF5 object. Files are opened read-only, once per process.
//
// Why reads bypass HDF5 when they can: the thread-safe HDF5 build holds one global lock for every
// call, so N loader threads calling H5Dread run one at a time. The layout stores images as
// unfiltered chunks allocated at creation, so at open we ask HDF5 once for each chunk's file
// offset and afterwards read pixels with pread(2) on our own descriptor, in parallel and without
// the lock. Files with filters (compression) fall back to H5Dread.
// Thread safety: after open(), all const methods may be called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format.hpp"

namespace hpctrain::data {

struct SourceOptions {
  // HDF5 file locking fails on many Lustre/GPFS mounts, and we only ever read, so it is off by
  // default ([data] file_locking).
  bool file_locking = false;
  // Read pixels with pread(2) where the layout allows; false forces H5Dread (for measurement).
  bool direct_reads = true;
  // Files whose pixels fit in this budget (taken in order) are read whole into memory at open:
  // a small dataset (MNIST, CIFAR) then costs one sequential read per process instead of a
  // syscall per sample per epoch, which measured 2-5x slower than raw bandwidth. 0: never.
  int64_t cache_bytes = int64_t{256} << 20;
};

struct SourceFile {
  std::string path;
  int64_t first = 0, count = 0;  // global index range
  int64_t chunk_images = 0;      // 0 for contiguous layout
  bool direct = false;           // pixels read with pread(2)
  bool cached = false;           // pixels held in memory since open
};

// Expands globs (sorted) and literal paths; a glob that matches nothing, a missing literal path,
// or a file named twice is an error.
std::vector<std::string> expand_paths(const std::vector<std::string>& paths_or_globs);

class ImageSource {
 public:
  static std::shared_ptr<ImageSource> open(const std::vector<std::string>& paths_or_globs,
                                           const SourceOptions& options = {});
  ~ImageSource();
  ImageSource(const ImageSource&) = delete;
  ImageSource& operator=(const ImageSource&) = delete;

  const DatasetInfo& info() const { return info_; }
  int64_t size() const { return info_.num_samples; }
  const std::vector<int64_t>& labels() const { return labels_; }
  const std::vector<SourceFile>& files() const { return files_; }

  // Copies samples [first, first + count) (uint8 NHWC, sample_bytes() each) into dst. The range
  // may cross file boundaries.
  void read(int64_t first, int64_t count, uint8_t* dst) const;

  // Hints that samples [first, first + count) will be read soon. On the direct path this starts
  // the kernel's asynchronous readahead (posix_fadvise WILLNEED), so the scattered small reads of
  // a shuffled batch are in flight together instead of one per thread. No-op otherwise.
  void will_need(int64_t first, int64_t count) const;

 private:
  struct Handle;
  ImageSource() = default;
  size_t file_of(int64_t sample) const;
  void read_file(size_t file, int64_t local_first, int64_t count, uint8_t* dst) const;

  DatasetInfo info_;
  std::vector<SourceFile> files_;
  std::vector<std::unique_ptr<Handle>> handles_;
  std::vector<int64_t> labels_;
};

}  // namespace hpctrain::data
