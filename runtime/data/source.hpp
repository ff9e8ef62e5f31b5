// ImageSource: one or more dataset files (docs/dataset-format.md) read as a single index space.
//
// Every file is validated when opened (read_header/read_labels, format.hpp), before anything sized
// by the file is allocated, and each failure names the file and the HDF5 object. Files are opened
// read-only, once per process.
//
// Why reads bypass HDF5 when they can: the thread-safe HDF5 build holds one global lock for every
// call, so N loader threads calling H5Dread run one at a time. The layout stores images as
// unfiltered chunks allocated at creation, so at open we ask HDF5 once for each chunk's file
// offset and afterwards read pixels with pread(2) on our own descriptor, in parallel and without
// the lock. Files with filters (compression) fall back to H5Dread.
// Coalescing: read_samples() takes a whole batch's samples, sorts their byte ranges, and reads
// ranges of one file that lie close together with a single preadv(2), scattering the images
// straight into place and the bytes between them into a discard buffer. Merging is bounded (a gap
// is at most one image and coalesce_gap_bytes) so at most half of what is read is discarded.
// The parts, a file each: the file list (paths.hpp: globs), one file's layout and where its
// samples lie (file_reader.hpp: HDF5's chunk mapping, pread), the files' one description
// (dataset_summary.hpp: shapes, classes, statistics), a batch's coalesced reads
// (coalesced_reads.cpp), the synthetic source (synthetic_source.cpp); source.cpp opens the files
// into one index space and reads ranges of it.
// Thread safety: after open(), all const methods may be called from any number of threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/format.hpp"

namespace hpctrain::spec {
struct Spec;
}

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
  // read_samples() merges ranges of the pread path into one I/O when the gap between them is at
  // most min(coalesce_gap_bytes, one image). One request costs a syscall and, on a disk, a
  // seek/latency; reading the gap costs bandwidth: capping the gap at one image bounds the extra
  // bytes, so small warm images are never slowed by reading (and discarding) much more than they
  // need. false: one pread per sample (for measurement and tests).
  bool coalesce_reads = true;
  int64_t coalesce_gap_bytes = int64_t{128} << 10;
};

// I/O issued on the pread path (uncached direct files), summed over threads since open.
struct IoCounters {
  int64_t reads = 0;  // pread/preadv system calls
  int64_t bytes = 0;  // bytes requested, discarded gaps included
};

struct SourceFile {
  std::string path;
  int64_t first = 0, count = 0;  // global index range
  int64_t chunk_images = 0;      // 0 for contiguous layout
  bool direct = false;           // pixels read with pread(2)
  bool cached = false;           // pixels held in memory since open
};

// [data] file_locking; the rest are the library's settings.
SourceOptions source_options_from_spec(const spec::Spec& spec);

class ImageSource {
 public:
  // paths_or_globs: expand_paths() (data/paths.hpp).
  static std::shared_ptr<ImageSource> open(const std::vector<std::string>& paths_or_globs,
                                           const SourceOptions& options = {});
  // `num_samples` random images (side x side x channels, uniform bytes) with random labels in
  // [0, num_classes), held in memory: a pure function of `seed`, the same on every rank.
  // For benchmarks and smoke tests ([data] synthetic).
  static std::shared_ptr<ImageSource> synthetic(int64_t num_samples, int64_t side, int64_t channels,
                                                int64_t num_classes, uint64_t seed);
  ~ImageSource();
  ImageSource(const ImageSource&) = delete;
  ImageSource& operator=(const ImageSource&) = delete;

  const DatasetInfo& info() const { return info_; }
  int64_t size() const { return info_.num_samples; }
  const std::vector<int64_t>& labels() const { return labels_; }
  const std::vector<SourceFile>& files() const { return files_; }

  // Version-2 files: every sample is an encoded (JPEG) image of its own size.
  bool encoded() const { return info_.encoding != Encoding::kRaw; }
  // "<file>: sample <index in the file>", for errors about one sample.
  std::string sample_name(int64_t sample) const;

  // Copies samples [first, first + count) (uint8 NHWC, sample_bytes() each) into dst. The range
  // may cross file boundaries. Pixel datasets only (not encoded()).
  void read(int64_t first, int64_t count, uint8_t* dst) const;

  // Encoded datasets: the bytes of samples[i] (any order, repeats allowed) go to
  // bytes[starts[i], starts[i + 1]); both vectors are resized. Reads are sorted and coalesced as
  // read_samples() does.
  void read_encoded(const int64_t* samples, int64_t n, std::vector<uint8_t>& bytes,
                    std::vector<size_t>& starts) const;
  // The encoded size of one sample.
  size_t encoded_size(int64_t sample) const;

  // Hints that samples [first, first + count) will be read soon. On the direct path this starts
  // the kernel's asynchronous readahead (posix_fadvise WILLNEED), so the scattered small reads of
  // a shuffled batch are in flight together instead of one per thread. No-op otherwise.
  void will_need(int64_t first, int64_t count) const;

  // Copies samples[i] (global indices, any order, repeats allowed) to dst + i * sample_bytes(),
  // coalescing reads as described above. Pixel datasets only.
  void read_samples(const int64_t* samples, int64_t n, uint8_t* dst) const;
  // will_need() for a set of samples: one hint per coalesced range. No-op unless some file is
  // read with pread.
  void will_need_samples(const int64_t* samples, int64_t n) const;

  IoCounters io_counters() const;

 private:
  struct Handle;
  ImageSource() = default;
  size_t file_of(int64_t sample) const;
  void read_file(size_t file, int64_t local_first, int64_t count, uint8_t* dst) const;
  struct Piece;
  // Byte ranges of the pread-path samples, sorted and grouped into coalesced ranges; other
  // samples are returned in `rest`.
  void plan_pieces(const int64_t* samples, int64_t n, std::vector<Piece>& pieces,
                   std::vector<int64_t>& rest) const;
  void require_pixels(const char* what) const;

  DatasetInfo info_;
  std::vector<SourceFile> files_;
  std::vector<std::unique_ptr<Handle>> handles_;
  std::vector<int64_t> labels_;
  SourceOptions options_;
  bool any_pread_ = false;  // some file is direct and not held in memory
  mutable std::atomic<int64_t> io_reads_{0}, io_bytes_{0};
};

}  // namespace hpctrain::data
