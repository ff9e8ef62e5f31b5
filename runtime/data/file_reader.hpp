// One dataset file of an ImageSource (data/source.hpp), the source's private part: the file
// opened for pread(2) and for HDF5, its header checked (read_header(), data/format.hpp), where its
// samples lie in the file (HDF5's chunk mapping, asked once at open, so that later reads bypass
// HDF5 and its global lock), and the whole file mapped when the source's cache allows. Included by
// the source's own files only (source.cpp, coalesced_reads.cpp, synthetic_source.cpp).
// Thread safety: set up on one thread at open; afterwards copy(), offset_of() and the pread
// helpers may be called from any number of threads.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/format.hpp"
#include "data/h5.hpp"
#include "data/source.hpp"

namespace hpctrain::data {

// Reads all of the iovecs at absolute file `offset` or throws rt::DatasetFormatError naming
// `path`: a short read means the file ends before its metadata says. preadv(2) until every iovec
// is full; iov is consumed (advanced past what was read); `calls` counts the system calls.
void preadv_all(int fd, iovec* iov, size_t count, uint64_t offset, const std::string& path,
                std::atomic<int64_t>& calls);
void pread_all(int fd, uint8_t* dst, size_t bytes, uint64_t offset, const std::string& path,
               std::atomic<int64_t>& calls);

struct ImageSource::Handle {
  std::string path;
  int fd = -1;
  h5::Hid file, images;
  int64_t sample_bytes = 0;
  int64_t chunk_images = 0;  // 0: contiguous
  bool direct = false;
  uint64_t contiguous_offset = 0;      // absolute file offset, contiguous layout
  std::vector<uint64_t> chunk_offset;  // absolute file offsets, chunked layout
  std::vector<uint8_t> cache;          // all pixels (filtered files), when cache_bytes allows
  const uint8_t* map = nullptr;        // the whole file mapped (direct files), when it allows
  size_t map_bytes = 0;
  std::vector<uint64_t> sample_offsets;      // encoded files: N + 1 offsets into /encoded
  std::atomic<int64_t>* io_reads = nullptr;  // the source's counter

  ~Handle();

  // Copies `bytes` at absolute file `offset` (direct layouts only).
  void copy(uint8_t* dst, size_t bytes, uint64_t offset) const;

  bool pread_path() const { return direct && map == nullptr; }

  // Opens `path` for pread(2) and for HDF5; returns the file's size.
  uint64_t open_file(bool file_locking);
  // Reads and checks the header (format.hpp), opens /images (or /encoded and its index) and,
  // with `direct_reads`, finds where the pixels lie. Nothing sized by the file is allocated
  // before the header's checks pass.
  DatasetHeader read_layout(uint64_t file_size, bool direct_reads);
  // A read-only shared mapping of the whole file, populated now: one sequential read into the
  // page cache, no copy into private memory, and ranks on one node share the pages. False when
  // mmap fails (the file is then read as if not cached).
  bool map_whole_file(uint64_t file_size);

  // Absolute file offset of local sample i (direct layouts only).
  uint64_t offset_of(int64_t i) const {
    if (!sample_offsets.empty()) return contiguous_offset + sample_offsets[static_cast<size_t>(i)];
    const auto sb = static_cast<uint64_t>(sample_bytes);
    if (chunk_images == 0) return contiguous_offset + static_cast<uint64_t>(i) * sb;
    const int64_t ci = i / chunk_images;
    return chunk_offset[static_cast<size_t>(ci)] +
           static_cast<uint64_t>(i - ci * chunk_images) * sb;
  }

 private:
  // Finds where the pixels of an unfiltered /images lie in the file, so that they can be read
  // with pread(2) instead of H5Dread; leaves `direct` false when the layout does not allow it.
  // Chunks are mapped here, once: each must have been written and lie inside the file.
  void locate_pixels(const DatasetHeader& header, uint64_t file_size);
};

}  // namespace hpctrain::data
