#include "data/source.hpp"

#include <fcntl.h>
#include <hdf5.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "data/dataset_summary.hpp"
#include "data/file_reader.hpp"
#include "data/h5.hpp"
#include "data/paths.hpp"
#include "spec/spec.hpp"

namespace hpctrain::data {

SourceOptions source_options_from_spec(const spec::Spec& spec) {
  SourceOptions o;
  o.file_locking = spec.data.file_locking;
  return o;
}

std::shared_ptr<ImageSource> ImageSource::open(const std::vector<std::string>& paths_or_globs,
                                               const SourceOptions& options) {
  h5::quiet();
  std::shared_ptr<ImageSource> src(new ImageSource());
  src->options_ = options;
  DatasetSummary summary;
  int64_t next_sample = 0;
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
    summary.add(info, path);

    // Labels last: the only allocation sized by N, bounded by the checks above.
    const size_t base = src->labels_.size();
    src->labels_.resize(base + static_cast<size_t>(n));
    read_labels(h.file, header, path, src->labels_.data() + base);

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
    file.first = next_sample;
    file.count = n;
    file.chunk_images = h.chunk_images;
    file.direct = h.direct;
    src->any_pread_ = src->any_pread_ || h.pread_path();
    next_sample += n;
    src->files_.push_back(file);
    src->handles_.push_back(std::move(handle));
  }
  src->info_ = summary.finish();
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

}  // namespace hpctrain::data
