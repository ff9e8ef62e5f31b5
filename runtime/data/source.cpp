#include "data/source.hpp"

#include <fcntl.h>
#include <glob.h>
#include <hdf5.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <set>

#include "common/error.hpp"
#include "data/h5.hpp"
#include "data/rng.hpp"
#include "spec/spec.hpp"

namespace hpctrain::data {

namespace {

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  HPCTRAIN_THROW(rt::DatasetFormatError, path + ": " + what);
}

// Reads all of `bytes` or throws; a short read means the file ends before its metadata says.
// preadv(2) until every iovec is full; iov is consumed (advanced past what was read).
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

}  // namespace

struct ImageSource::Piece {
  size_t file = 0;
  uint64_t offset = 0;  // absolute file offset of the sample's pixels
  int64_t slot = 0;     // position in the caller's list
  bool operator<(const Piece& o) const {
    return file != o.file ? file < o.file : offset != o.offset ? offset < o.offset : slot < o.slot;
  }
};

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

  ~Handle() {
    if (map != nullptr) ::munmap(const_cast<uint8_t*>(map), map_bytes);
    if (fd >= 0) ::close(fd);
  }

  // Copies `bytes` at absolute file `offset` (direct layouts only).
  void copy(uint8_t* dst, size_t bytes, uint64_t offset) const {
    if (map != nullptr) {
      std::memcpy(dst, map + offset, bytes);
    } else {
      pread_all(fd, dst, bytes, offset, path, *io_reads);
    }
  }

  bool pread_path() const { return direct && map == nullptr; }

  // Finds where the pixels of an unfiltered /images lie in the file, so that they can be read
  // with pread(2) instead of H5Dread; leaves `direct` false when the layout does not allow it.
  // Chunks are mapped here, once: each must have been written and lie inside the file.
  void locate_pixels(const DatasetHeader& header, uint64_t file_size);

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
};

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

namespace {

// Adds one file's description to the dataset's: the first file sets it, the others must match
// (encoded images may differ in size: the summary keeps the largest).
void add_to_summary(DatasetInfo& summary, const std::vector<SourceFile>& files,
                    const DatasetInfo& info, const std::string& path) {
  const bool encoded = info.encoding != Encoding::kRaw;
  if (!files.empty() && summary.encoding != info.encoding) {
    fail(path, std::string("holds ") +
                   (encoded ? "encoded images (format version 2)" : "pixels (format version 1)") +
                   " but " + files.front().path + " does not (files of one dataset must match)");
  }
  if (!files.empty() && encoded) {
    summary.height = std::max(summary.height, info.height);
    summary.width = std::max(summary.width, info.width);
  }
  if (files.empty()) {
    summary.encoding = info.encoding;
    summary.height = info.height;
    summary.width = info.width;
    summary.channels = info.channels;
    summary.num_classes = info.num_classes;
    summary.class_names = info.class_names;
    summary.chunk_images = info.chunk_images;
    return;
  }
  const std::string& first_path = files.front().path;
  if ((!encoded && (summary.height != info.height || summary.width != info.width)) ||
      summary.channels != info.channels) {
    fail(path, "images are " + std::to_string(info.height) + "x" + std::to_string(info.width) +
                   "x" + std::to_string(info.channels) + " but " + first_path + " has " +
                   std::to_string(summary.height) + "x" + std::to_string(summary.width) + "x" +
                   std::to_string(summary.channels) + " (files of one dataset must match)");
  }
  if (summary.num_classes != info.num_classes || summary.class_names != info.class_names) {
    fail(path, "class names differ from " + first_path + " (files of one dataset must match)");
  }
}

// Per-file statistics combine by sample count; std is an approximation (the mean of the
// per-file deviations), close enough for normalisation.
struct PixelStatistics {
  std::vector<double> mean_sum, std_sum;

  void add(const DatasetInfo& info) {
    if (mean_sum.empty()) {
      mean_sum.assign(info.channels, 0.0);
      std_sum.assign(info.channels, 0.0);
    }
    const auto n = static_cast<double>(info.num_samples);
    for (int64_t c = 0; c < info.channels; ++c) {
      mean_sum[c] += info.mean[c] * n;
      std_sum[c] += info.std[c] * n;
    }
  }
  void finish(DatasetInfo& summary) const {
    for (size_t c = 0; c < mean_sum.size(); ++c) {
      summary.mean.push_back(mean_sum[c] / static_cast<double>(summary.num_samples));
      summary.std.push_back(std_sum[c] / static_cast<double>(summary.num_samples));
    }
  }
};

}  // namespace

std::shared_ptr<ImageSource> ImageSource::synthetic(int64_t num_samples, int64_t side,
                                                    int64_t channels, int64_t num_classes,
                                                    uint64_t seed) {
  if (num_samples < 1 || side < 1 || side > kMaxSide || channels < 1 || channels > kMaxChannels ||
      num_classes < 1 || num_classes > kMaxClasses) {
    HPCTRAIN_THROW(rt::DataError, "synthetic data: invalid shape " + std::to_string(num_samples) +
                                      " x " + std::to_string(side) + "x" + std::to_string(side) +
                                      "x" + std::to_string(channels) + ", " +
                                      std::to_string(num_classes) + " classes");
  }
  std::shared_ptr<ImageSource> src(new ImageSource());
  DatasetInfo& info = src->info_;
  info.num_samples = num_samples;
  info.height = info.width = side;
  info.channels = channels;
  info.num_classes = num_classes;
  for (int64_t k = 0; k < num_classes; ++k) info.class_names.push_back("class" + std::to_string(k));
  // Uniform bytes: mean 127.5 / 255, std sqrt((256^2 - 1) / 12) / 255.
  info.mean.assign(static_cast<size_t>(channels), 0.5);
  info.std.assign(static_cast<size_t>(channels), 0.28868);
  auto handle = std::make_unique<Handle>();
  handle->path = "synthetic";
  handle->sample_bytes = info.sample_bytes();
  handle->cache.resize(static_cast<size_t>(num_samples * info.sample_bytes()));
  SplitMix64 pixels(derive_key(seed, kSyntheticDomain));
  for (size_t i = 0; i < handle->cache.size(); i += 8) {
    const uint64_t r = pixels.next();
    std::memcpy(handle->cache.data() + i, &r, std::min<size_t>(8, handle->cache.size() - i));
  }
  SplitMix64 labels(derive_key(seed, kSyntheticDomain, 1));
  for (int64_t i = 0; i < num_samples; ++i) {
    src->labels_.push_back(static_cast<int64_t>(labels.below(static_cast<uint64_t>(num_classes))));
  }
  SourceFile file;
  file.path = handle->path;
  file.count = num_samples;
  file.cached = true;
  src->files_.push_back(file);
  src->handles_.push_back(std::move(handle));
  return src;
}

SourceOptions source_options_from_spec(const spec::Spec& spec) {
  SourceOptions o;
  o.file_locking = spec.data.file_locking;
  return o;
}

std::vector<std::string> expand_paths(const std::vector<std::string>& paths_or_globs) {
  std::vector<std::string> out;
  for (const auto& p : paths_or_globs) {
    if (!has_glob_chars(p)) {
      out.push_back(p);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(p.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      globfree(&g);
      HPCTRAIN_THROW(rt::DataError, "dataset pattern '" + p + "' matches no files");
    }
    if (rc != 0) {
      globfree(&g);
      HPCTRAIN_THROW(rt::DataError, "dataset pattern '" + p + "': cannot list the directory");
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matches.begin(), matches.end());
    out.insert(out.end(), matches.begin(), matches.end());
  }
  if (out.empty()) HPCTRAIN_THROW(rt::DataError, "no dataset files given");
  std::set<std::string> seen;
  for (const auto& p : out) {
    if (!seen.insert(p).second) HPCTRAIN_THROW(rt::DataError, p + ": dataset file named twice");
  }
  return out;
}

std::shared_ptr<ImageSource> ImageSource::open(const std::vector<std::string>& paths_or_globs,
                                               const SourceOptions& options) {
  h5::quiet();
  std::shared_ptr<ImageSource> src(new ImageSource());
  src->options_ = options;
  PixelStatistics statistics;
  int64_t cache_left = options.cache_bytes;

  for (const auto& path : expand_paths(paths_or_globs)) {
    auto handle = std::make_unique<Handle>();
    Handle& h = *handle;
    h.path = path;
    h.io_reads = &src->io_reads_;
    const uint64_t file_size = h.open_file(options.file_locking);
    const DatasetHeader header = h.read_layout(file_size, options.direct_reads);
    const DatasetInfo& info = header.info;
    const int64_t n = info.num_samples;
    add_to_summary(src->info_, src->files_, info, path);

    // Labels last: the only allocation sized by N, bounded by the checks above.
    const size_t base = src->labels_.size();
    src->labels_.resize(base + static_cast<size_t>(n));
    read_labels(h.file, header, path, src->labels_.data() + base);
    statistics.add(info);

    // Held in memory when the budget allows: mapped (direct layouts), else read once.
    const uint64_t total_bytes = header.pixel_bytes();
    SourceFile file;
    if (static_cast<int64_t>(total_bytes) <= cache_left) {
      cache_left -= static_cast<int64_t>(total_bytes);
      if (h.direct) {
        file.cached = h.map_whole_file(file_size);
      } else {
        // Read through the normal path (one large read per chunk), then serve from memory.
        std::vector<uint8_t> pixels(total_bytes);
        if (info.encoding != Encoding::kRaw) {
          h5::read_rows(h.images.get(), H5T_NATIVE_UINT8, 0, static_cast<int64_t>(total_bytes),
                        pixels.data(), path + ": cannot read dataset /encoded");
        } else {
          src->handles_.push_back(std::move(handle));
          src->read_file(src->handles_.size() - 1, 0, n, pixels.data());
          handle = std::move(src->handles_.back());
          src->handles_.pop_back();
        }
        h.cache = std::move(pixels);
        file.cached = true;
      }
    }
    file.path = path;
    file.first = src->info_.num_samples;
    file.count = n;
    file.chunk_images = h.chunk_images;
    file.direct = h.direct;
    src->any_pread_ = src->any_pread_ || h.pread_path();
    src->info_.num_samples += n;
    src->files_.push_back(file);
    src->handles_.push_back(std::move(handle));
  }
  statistics.finish(src->info_);
  return src;
}

ImageSource::~ImageSource() = default;

void ImageSource::require_pixels(const char* what) const {
  if (encoded()) {
    HPCTRAIN_THROW(rt::DataError, std::string(what) +
                                      ": the dataset holds encoded images; read them with "
                                      "read_encoded");
  }
}

std::string ImageSource::sample_name(int64_t sample) const {
  if (sample < 0 || sample >= size()) return "sample " + std::to_string(sample);
  const size_t fi = file_of(sample);
  return files_[fi].path + ": sample " + std::to_string(sample - files_[fi].first);
}

void ImageSource::read(int64_t first, int64_t count, uint8_t* dst) const {
  require_pixels("read");
  if (first < 0 || count < 0 || first + count > size()) {
    HPCTRAIN_THROW(rt::DataError, "read of samples [" + std::to_string(first) + ", " +
                                      std::to_string(first + count) + ") outside the dataset of " +
                                      std::to_string(size()));
  }
  size_t fi = file_of(first);
  while (count > 0) {
    const SourceFile& f = files_[fi];
    const int64_t local = first - f.first;
    const int64_t take = std::min(count, f.count - local);
    read_file(fi, local, take, dst);
    dst += take * info_.sample_bytes();
    first += take;
    count -= take;
    ++fi;
  }
}

size_t ImageSource::file_of(int64_t sample) const {
  auto it = std::upper_bound(files_.begin(), files_.end(), sample,
                             [](int64_t v, const SourceFile& f) { return v < f.first; });
  return static_cast<size_t>(it - files_.begin()) - 1;
}

void ImageSource::will_need(int64_t first, int64_t count) const {
  if (first < 0 || count <= 0 || first + count > size()) return;
  const size_t fi = file_of(first);
  const Handle& h = *handles_[fi];
  if (!h.direct || h.map != nullptr) return;
  // Only the part in the first file: batches hint per run of consecutive samples, which rarely
  // cross a file boundary, and a hint is only a hint.
  int64_t local = first - files_[fi].first;
  count = std::min(count, files_[fi].count - local);
  if (!h.sample_offsets.empty()) {
    const uint64_t from = h.offset_of(local);
    ::posix_fadvise(h.fd, static_cast<off_t>(from),
                    static_cast<off_t>(h.offset_of(local + count) - from), POSIX_FADV_WILLNEED);
    return;
  }
  const auto sb = static_cast<uint64_t>(h.sample_bytes);
  while (count > 0) {
    uint64_t offset = 0;
    int64_t take = count;
    if (h.chunk_images == 0) {
      offset = h.contiguous_offset + static_cast<uint64_t>(local) * sb;
    } else {
      const int64_t ci = local / h.chunk_images;
      const int64_t in_chunk = local - ci * h.chunk_images;
      take = std::min(count, h.chunk_images - in_chunk);
      offset = h.chunk_offset[static_cast<size_t>(ci)] + static_cast<uint64_t>(in_chunk) * sb;
    }
    ::posix_fadvise(h.fd, static_cast<off_t>(offset), static_cast<off_t>(take * h.sample_bytes),
                    POSIX_FADV_WILLNEED);
    local += take;
    count -= take;
  }
}

void ImageSource::read_file(size_t file, int64_t local_first, int64_t count, uint8_t* dst) const {
  const Handle& h = *handles_[file];
  const auto sb = static_cast<uint64_t>(h.sample_bytes);
  if (!h.cache.empty()) {
    std::memcpy(dst, h.cache.data() + static_cast<uint64_t>(local_first) * sb,
                static_cast<size_t>(count) * sb);
    return;
  }
  if (h.direct && h.chunk_images == 0) {
    h.copy(dst, static_cast<size_t>(count) * sb,
           h.contiguous_offset + static_cast<uint64_t>(local_first) * sb);
    if (h.map == nullptr) io_bytes_.fetch_add(count * h.sample_bytes, std::memory_order_relaxed);
    return;
  }
  if (h.direct) {
    // One pread per chunk touched: consecutive samples inside a chunk are contiguous on disk.
    while (count > 0) {
      const int64_t ci = local_first / h.chunk_images;
      const int64_t in_chunk = local_first - ci * h.chunk_images;
      const int64_t take = std::min(count, h.chunk_images - in_chunk);
      h.copy(dst, static_cast<size_t>(take) * sb,
             h.chunk_offset[static_cast<size_t>(ci)] + static_cast<uint64_t>(in_chunk) * sb);
      if (h.map == nullptr) io_bytes_.fetch_add(take * h.sample_bytes, std::memory_order_relaxed);
      dst += static_cast<uint64_t>(take) * sb;
      local_first += take;
      count -= take;
    }
    return;
  }
  h5::quiet();
  h5::read_rows(h.images.get(), H5T_NATIVE_UINT8, local_first, count, dst,
                h.path + ": cannot read dataset /images");
}

IoCounters ImageSource::io_counters() const {
  return {io_reads_.load(std::memory_order_relaxed), io_bytes_.load(std::memory_order_relaxed)};
}

void ImageSource::plan_pieces(const int64_t* samples, int64_t n, std::vector<Piece>& pieces,
                              std::vector<int64_t>& rest) const {
  pieces.clear();
  rest.clear();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = samples[i];
    if (s < 0 || s >= size()) {
      HPCTRAIN_THROW(rt::DataError, "read of sample " + std::to_string(s) +
                                        " outside the dataset of " + std::to_string(size()));
    }
    const size_t fi = file_of(s);
    const Handle& h = *handles_[fi];
    if (h.pread_path()) {
      pieces.push_back({fi, h.offset_of(s - files_[fi].first), i});
    } else {
      rest.push_back(i);
    }
  }
  std::sort(pieces.begin(), pieces.end());
}

namespace {
// Largest gap merged into one I/O; < 0: nothing is merged, not even adjacent samples.
int64_t merge_gap(const SourceOptions& o, int64_t sample_bytes) {
  return o.coalesce_reads ? std::min(o.coalesce_gap_bytes, sample_bytes) : -1;
}
}  // namespace

size_t ImageSource::encoded_size(int64_t sample) const {
  if (!encoded() || sample < 0 || sample >= size()) {
    HPCTRAIN_THROW(rt::DataError, "encoded_size of sample " + std::to_string(sample) +
                                      " of a dataset of " + std::to_string(size()) +
                                      (encoded() ? "" : " pixel") + " samples");
  }
  const size_t fi = file_of(sample);
  const auto local = static_cast<size_t>(sample - files_[fi].first);
  const auto& o = handles_[fi]->sample_offsets;
  return static_cast<size_t>(o[local + 1] - o[local]);
}

void ImageSource::read_encoded(const int64_t* samples, int64_t n, std::vector<uint8_t>& bytes,
                               std::vector<size_t>& starts) const {
  if (!encoded()) HPCTRAIN_THROW(rt::DataError, "read_encoded: the dataset holds pixels");
  starts.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    starts[static_cast<size_t>(i) + 1] = starts[static_cast<size_t>(i)] + encoded_size(samples[i]);
  }
  bytes.resize(starts.back());
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<int64_t> rest;
  thread_local std::vector<iovec> iov;
  thread_local std::vector<uint8_t> discard;
  plan_pieces(samples, n, pieces, rest);
  // Mapped, cached and H5Dread files: a copy or one H5Dread per sample.
  for (const int64_t i : rest) {
    const size_t fi = file_of(samples[i]);
    const Handle& h = *handles_[fi];
    const auto local = static_cast<size_t>(samples[i] - files_[fi].first);
    const uint64_t at = h.sample_offsets[local];
    const size_t size = starts[static_cast<size_t>(i) + 1] - starts[static_cast<size_t>(i)];
    uint8_t* dst = bytes.data() + starts[static_cast<size_t>(i)];
    if (!h.cache.empty()) {
      std::memcpy(dst, h.cache.data() + at, size);
    } else if (h.map != nullptr) {
      std::memcpy(dst, h.map + h.contiguous_offset + at, size);
    } else {
      h5::quiet();
      h5::read_rows(h.images.get(), H5T_NATIVE_UINT8, static_cast<int64_t>(at),
                    static_cast<int64_t>(size), dst, h.path + ": cannot read dataset /encoded");
    }
  }
  // pread files: sorted by offset, nearby samples in one preadv, the gaps discarded.
  const int64_t gap = options_.coalesce_reads ? options_.coalesce_gap_bytes : -1;
  if (gap > 0 && discard.size() < static_cast<size_t>(gap))
    discard.resize(static_cast<size_t>(gap));
  constexpr size_t kMaxIov = IOV_MAX >= 2 ? IOV_MAX : 2;
  auto size_of = [&](const Piece& p) {
    return starts[static_cast<size_t>(p.slot) + 1] - starts[static_cast<size_t>(p.slot)];
  };
  auto slot_of = [&](const Piece& p) { return bytes.data() + starts[static_cast<size_t>(p.slot)]; };
  for (size_t a = 0; a < pieces.size();) {
    const Handle& h = *handles_[pieces[a].file];
    iov.clear();
    iov.push_back({slot_of(pieces[a]), size_of(pieces[a])});
    uint64_t end = pieces[a].offset + size_of(pieces[a]);
    size_t b = a + 1;
    for (; b < pieces.size() && pieces[b].file == pieces[a].file; ++b) {
      const Piece& p = pieces[b];
      if (p.offset < end) continue;  // the same sample again: copied below
      if (static_cast<int64_t>(p.offset - end) > gap || iov.size() + 2 > kMaxIov) break;
      if (p.offset > end) iov.push_back({discard.data(), static_cast<size_t>(p.offset - end)});
      iov.push_back({slot_of(p), size_of(p)});
      end = p.offset + size_of(p);
    }
    io_bytes_.fetch_add(static_cast<int64_t>(end - pieces[a].offset), std::memory_order_relaxed);
    preadv_all(h.fd, iov.data(), iov.size(), pieces[a].offset, h.path, io_reads_);
    for (size_t m = a + 1; m < b; ++m) {
      if (pieces[m].offset == pieces[m - 1].offset) {
        std::memcpy(slot_of(pieces[m]), slot_of(pieces[m - 1]), size_of(pieces[m]));
      }
    }
    a = b;
  }
}

void ImageSource::read_samples(const int64_t* samples, int64_t n, uint8_t* dst) const {
  require_pixels("read_samples");
  // Scratch per thread: loader workers call this once per batch.
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<int64_t> rest;
  thread_local std::vector<iovec> iov;
  thread_local std::vector<uint8_t> discard;
  plan_pieces(samples, n, pieces, rest);
  const auto sb = static_cast<size_t>(info_.sample_bytes());
  {
    // Mapped, cached and H5Dread files: one read per run of consecutive samples (one H5Dread
    // costs far more than a copy), scattered from a scratch buffer.
    thread_local std::vector<uint8_t> run_buf;
    std::sort(rest.begin(), rest.end(), [&](int64_t x, int64_t y) {
      return samples[x] != samples[y] ? samples[x] < samples[y] : x < y;
    });
    for (size_t a = 0; a < rest.size();) {
      size_t b = a + 1;
      while (b < rest.size() && samples[rest[b]] == samples[rest[b - 1]] + 1) ++b;
      if (b - a == 1) {
        read(samples[rest[a]], 1, dst + static_cast<size_t>(rest[a]) * sb);
      } else {
        run_buf.resize((b - a) * sb);
        read(samples[rest[a]], static_cast<int64_t>(b - a), run_buf.data());
        for (size_t m = a; m < b; ++m) {
          std::memcpy(dst + static_cast<size_t>(rest[m]) * sb, run_buf.data() + (m - a) * sb, sb);
        }
      }
      a = b;
    }
  }

  const int64_t gap = merge_gap(options_, info_.sample_bytes());
  if (gap > 0 && discard.size() < static_cast<size_t>(gap))
    discard.resize(static_cast<size_t>(gap));
  // IOV_MAX bounds one preadv; each sample needs at most two entries (gap + image).
  constexpr size_t kMaxIov = IOV_MAX >= 2 ? IOV_MAX : 2;
  for (size_t a = 0; a < pieces.size();) {
    const Handle& h = *handles_[pieces[a].file];
    iov.clear();
    iov.push_back({dst + static_cast<size_t>(pieces[a].slot) * sb, sb});
    uint64_t end = pieces[a].offset + sb;
    size_t b = a + 1;
    for (; b < pieces.size() && pieces[b].file == pieces[a].file; ++b) {
      const Piece& p = pieces[b];
      if (p.offset < end) {
        // The same sample twice (padded tails): copied below from its first copy.
        continue;
      }
      if (static_cast<int64_t>(p.offset - end) > gap || iov.size() + 2 > kMaxIov) break;
      if (p.offset > end) iov.push_back({discard.data(), static_cast<size_t>(p.offset - end)});
      iov.push_back({dst + static_cast<size_t>(p.slot) * sb, sb});
      end = p.offset + sb;
    }
    io_bytes_.fetch_add(static_cast<int64_t>(end - pieces[a].offset), std::memory_order_relaxed);
    if (iov.size() == 1) {
      pread_all(h.fd, dst + static_cast<size_t>(pieces[a].slot) * sb, sb, pieces[a].offset, h.path,
                io_reads_);
    } else {
      preadv_all(h.fd, iov.data(), iov.size(), pieces[a].offset, h.path, io_reads_);
    }
    for (size_t m = a + 1; m < b; ++m) {
      if (pieces[m].offset == pieces[m - 1].offset) {
        std::memcpy(dst + static_cast<size_t>(pieces[m].slot) * sb,
                    dst + static_cast<size_t>(pieces[m - 1].slot) * sb, sb);
      }
    }
    a = b;
  }
}

void ImageSource::will_need_samples(const int64_t* samples, int64_t n) const {
  if (!any_pread_) return;
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<int64_t> rest;
  plan_pieces(samples, n, pieces, rest);
  auto size_of = [&](const Piece& p) -> uint64_t {
    return encoded() ? encoded_size(samples[p.slot]) : static_cast<uint64_t>(info_.sample_bytes());
  };
  // Merged like reads: fewer, larger requests, and the gaps are as small as the reads'.
  const int64_t gap = std::max<int64_t>(
      0, encoded() ? options_.coalesce_gap_bytes : merge_gap(options_, info_.sample_bytes()));
  for (size_t a = 0; a < pieces.size();) {
    uint64_t end = pieces[a].offset + size_of(pieces[a]);
    size_t b = a + 1;
    while (b < pieces.size() && pieces[b].file == pieces[a].file &&
           pieces[b].offset <= end + static_cast<uint64_t>(gap)) {
      end = std::max(end, pieces[b].offset + size_of(pieces[b]));
      ++b;
    }
    ::posix_fadvise(handles_[pieces[a].file]->fd, static_cast<off_t>(pieces[a].offset),
                    static_cast<off_t>(end - pieces[a].offset), POSIX_FADV_WILLNEED);
    a = b;
  }
}

}  // namespace hpctrain::data
