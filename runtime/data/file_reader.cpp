#include "data/file_reader.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace hpctrain::data {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  HPCTRAIN_THROW(rt::DatasetFormatError, path + ": " + what);
}

}  // namespace

void preadv_all(int fd, iovec* iov, size_t count, uint64_t offset, const std::string& path,
                std::atomic<int64_t>& calls) {
  while (count > 0) {
    calls.fetch_add(1, std::memory_order_relaxed);
    const ssize_t n = ::preadv(fd, iov, static_cast<int>(count), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path,
           "read of /images failed at offset " + std::to_string(offset) + ": " + errno_text(errno));
    }
    if (n == 0) {
      fail(path, "/images ends at offset " + std::to_string(offset) + " (file truncated?)");
    }
    offset += static_cast<uint64_t>(n);
    auto left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (left > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
}

void pread_all(int fd, uint8_t* dst, size_t bytes, uint64_t offset, const std::string& path,
               std::atomic<int64_t>& calls) {
  iovec one{dst, bytes};
  preadv_all(fd, &one, 1, offset, path, calls);
}

ImageSource::Handle::~Handle() {
  if (map != nullptr) ::munmap(const_cast<uint8_t*>(map), map_bytes);
  if (fd >= 0) ::close(fd);
}

void ImageSource::Handle::copy(uint8_t* dst, size_t bytes, uint64_t offset) const {
  if (map != nullptr) {
    std::memcpy(dst, map + offset, bytes);
  } else {
    pread_all(fd, dst, bytes, offset, path, *io_reads);
  }
}

void ImageSource::Handle::locate_pixels(const DatasetHeader& header, uint64_t file_size) {
  if (header.filtered) return;
  const int64_t n = header.info.num_samples;
  if (header.storage == DatasetHeader::Storage::kChunked && header.whole_image_chunks) {
    const int64_t nchunks = (n + chunk_images - 1) / chunk_images;
    const uint64_t chunk_bytes =
        static_cast<uint64_t>(chunk_images) * static_cast<uint64_t>(sample_bytes);
    chunk_offset.resize(static_cast<size_t>(nchunks));
    for (int64_t ci = 0; ci < nchunks; ++ci) {
      const hsize_t coord[4] = {static_cast<hsize_t>(ci * chunk_images), 0, 0, 0};
      unsigned mask = 0;
      haddr_t addr = HADDR_UNDEF;
      hsize_t size = 0;
      h5::check(H5Dget_chunk_info_by_coord(images.get(), coord, &mask, &addr, &size),
                path + ": cannot locate chunk " + std::to_string(ci) + " of /images");
      if (addr == HADDR_UNDEF || size != chunk_bytes) {
        fail(path,
             "chunk " + std::to_string(ci) + " of /images was never written (incomplete file)");
      }
      if (addr + header.userblock + size > file_size) {
        fail(path, "chunk " + std::to_string(ci) +
                       " of /images lies past the end of the file (truncated file)");
      }
      chunk_offset[static_cast<size_t>(ci)] = addr + header.userblock;
    }
    direct = true;
  } else if (header.storage == DatasetHeader::Storage::kContiguous) {
    const char* name = header.info.encoding == Encoding::kRaw ? "/images" : "/encoded";
    const haddr_t addr = H5Dget_offset(images.get());
    if (addr == HADDR_UNDEF) {
      h5::error_text();
      fail(path, std::string("dataset ") + name + " has no storage (never written)");
    }
    if (addr + header.userblock + header.pixel_bytes() > file_size) {
      fail(path,
           std::string("dataset ") + name + " lies past the end of the file (truncated file)");
    }
    contiguous_offset = addr + header.userblock;
    direct = true;
  }
}

uint64_t ImageSource::Handle::open_file(bool file_locking) {
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    HPCTRAIN_THROW(rt::DataError, path + ": cannot open dataset file: " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    HPCTRAIN_THROW(rt::DataError, path + ": not a regular file");
  }
  h5::Hid fapl = h5::check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, path);
  h5::check(H5Pset_file_locking(fapl.get(), file_locking, /*ignore_when_disabled=*/true), path);
  file = h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                   path + ": not a readable HDF5 file");
  return static_cast<uint64_t>(st.st_size);
}

DatasetHeader ImageSource::Handle::read_layout(uint64_t file_size, bool direct_reads) {
  DatasetHeader header = read_header(file, path, file_size);
  const DatasetInfo& info = header.info;
  const bool encoded = info.encoding != Encoding::kRaw;
  images = open_dataset(file, encoded ? kEncodedName : kImagesName, path);
  sample_bytes = encoded ? 0 : info.sample_bytes();
  chunk_images = info.chunk_images;
  if (encoded) {
    sample_offsets.resize(static_cast<size_t>(info.num_samples) + 1);
    read_encoded_index(file, header, path, sample_offsets.data());
  }
  if (direct_reads) locate_pixels(header, file_size);
  return header;
}

bool ImageSource::Handle::map_whole_file(uint64_t file_size) {
  void* m = ::mmap(nullptr, file_size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (m == MAP_FAILED) return false;
  map = static_cast<const uint8_t*>(m);
  map_bytes = file_size;
  return true;
}

}  // namespace hpctrain::data
