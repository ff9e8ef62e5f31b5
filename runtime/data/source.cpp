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
#include <cmath>
#include <cstring>
#include <set>

#include "common/error.hpp"
#include "data/h5.hpp"
#include "spec/spec.hpp"

namespace hpctrain::data {

namespace {

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  HPCTRAIN_THROW(rt::DatasetFormatError, path + ": " + what);
}

// Attributes --------------------------------------------------------------------------------

h5::Hid open_attr(hid_t obj, const char* name, const std::string& path) {
  const htri_t exists = H5Aexists(obj, name);
  if (exists <= 0) {
    h5::error_text();
    fail(path, std::string("missing root attribute '") + name +
                   "'; not an hpctrain dataset (convert it with hpctrain-data)");
  }
  return h5::check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose,
                   path + ": cannot open attribute '" + name + "'");
}

// Number of elements of an attribute, checked against max_elements before anything is read.
hsize_t attr_elements(hid_t attr, const char* name, const std::string& path, hsize_t max_elements) {
  h5::Hid space = h5::check(H5Aget_space(attr), H5Sclose, path);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || H5Sget_simple_extent_ndims(space.get()) > 1) {
    fail(path, std::string("attribute '") + name + "' is not a scalar or 1-D array");
  }
  if (static_cast<hsize_t>(n) > max_elements) {
    fail(path, std::string("attribute '") + name + "' has " + std::to_string(n) +
                   " elements (at most " + std::to_string(max_elements) + " expected)");
  }
  return static_cast<hsize_t>(n);
}

std::vector<double> read_numbers(hid_t obj, const char* name, const std::string& path,
                                 hsize_t max_elements) {
  h5::Hid attr = open_attr(obj, name, path);
  h5::Hid type = h5::check(H5Aget_type(attr.get()), H5Tclose, path);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) {
    fail(path, std::string("attribute '") + name + "' is not numeric");
  }
  std::vector<double> values(attr_elements(attr.get(), name, path, max_elements));
  if (!values.empty()) {
    h5::check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, values.data()),
              path + ": cannot read attribute '" + name + "'");
  }
  return values;
}

int64_t read_integer(hid_t obj, const char* name, const std::string& path) {
  h5::Hid attr = open_attr(obj, name, path);
  h5::Hid type = h5::check(H5Aget_type(attr.get()), H5Tclose, path);
  if (H5Tget_class(type.get()) != H5T_INTEGER) {
    fail(path, std::string("attribute '") + name + "' is not an integer");
  }
  if (attr_elements(attr.get(), name, path, 1) != 1) {
    fail(path, std::string("attribute '") + name + "' is empty");
  }
  int64_t value = 0;
  h5::check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value),
            path + ": cannot read attribute '" + name + "'");
  return value;
}

std::vector<std::string> read_strings(hid_t obj, const char* name, const std::string& path,
                                      hsize_t max_elements) {
  h5::Hid attr = open_attr(obj, name, path);
  h5::Hid ftype = h5::check(H5Aget_type(attr.get()), H5Tclose, path);
  if (H5Tget_class(ftype.get()) != H5T_STRING) {
    fail(path, std::string("attribute '") + name + "' is not a string");
  }
  const hsize_t n = attr_elements(attr.get(), name, path, max_elements);
  std::vector<std::string> out;
  if (n == 0) return out;
  if (H5Tis_variable_str(ftype.get()) > 0) {
    h5::Hid mtype = h5::check(H5Tcopy(H5T_C_S1), H5Tclose, path);
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
    std::vector<char*> ptrs(n, nullptr);
    h5::check(H5Aread(attr.get(), mtype.get(), ptrs.data()),
              path + ": cannot read attribute '" + name + "'");
    for (char* p : ptrs) out.emplace_back(p != nullptr ? p : "");
    h5::Hid space = h5::check(H5Aget_space(attr.get()), H5Sclose, path);
    H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const size_t size = H5Tget_size(ftype.get());
    if (size == 0 || size > 4096) fail(path, std::string("attribute '") + name + "' is malformed");
    h5::Hid mtype = h5::check(H5Tcopy(H5T_C_S1), H5Tclose, path);
    H5Tset_size(mtype.get(), size);
    std::vector<char> buf(n * size);
    h5::check(H5Aread(attr.get(), mtype.get(), buf.data()),
              path + ": cannot read attribute '" + name + "'");
    for (hsize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + i * size;
      out.emplace_back(p, strnlen(p, size));
    }
  }
  return out;
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

  // Absolute file offset of local sample i (direct layouts only).
  uint64_t offset_of(int64_t i) const {
    const auto sb = static_cast<uint64_t>(sample_bytes);
    if (chunk_images == 0) return contiguous_offset + static_cast<uint64_t>(i) * sb;
    const int64_t ci = i / chunk_images;
    return chunk_offset[static_cast<size_t>(ci)] +
           static_cast<uint64_t>(i - ci * chunk_images) * sb;
  }
};

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
  const std::vector<std::string> paths = expand_paths(paths_or_globs);
  std::vector<double> mean_sum, std_sum;
  int64_t cache_left = options.cache_bytes;

  for (const auto& path : paths) {
    auto handle = std::make_unique<Handle>();
    Handle& h = *handle;
    h.path = path;
    h.io_reads = &src->io_reads_;
    h.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (h.fd < 0)
      HPCTRAIN_THROW(rt::DataError, path + ": cannot open dataset file: " + errno_text(errno));
    struct stat st {};
    if (::fstat(h.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      HPCTRAIN_THROW(rt::DataError, path + ": not a regular file");
    }
    const auto file_size = static_cast<uint64_t>(st.st_size);

    h5::Hid fapl = h5::check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, path);
    h5::check(H5Pset_file_locking(fapl.get(), options.file_locking, /*ignore_when_disabled=*/true),
              path);
    h.file = h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose,
                       path + ": not a readable HDF5 file");
    const hid_t root = h.file.get();

    // Identity first: a wrong file should say so, not complain about a missing dataset.
    const auto format = read_strings(root, "format", path, 1);
    if (format.size() != 1 || format[0] != kFormatName) {
      fail(path, "attribute 'format' is '" + (format.empty() ? "" : format[0]) + "', expected '" +
                     kFormatName + "'");
    }
    const int64_t version = read_integer(root, "format_version", path);
    if (version != kFormatVersion) {
      fail(path, "format version " + std::to_string(version) +
                     " is not supported (this build "
                     "reads version " +
                     std::to_string(kFormatVersion) + ")");
    }

    for (const char* name : {kImagesName, kLabelsName}) {
      if (H5Lexists(root, name, H5P_DEFAULT) <= 0) {
        h5::error_text();
        fail(path, std::string("dataset /") + name + " is missing");
      }
    }
    h.images = h5::check(H5Dopen2(root, kImagesName, H5P_DEFAULT), H5Dclose,
                         path + ": cannot open dataset /images");
    h5::Hid labels_ds = h5::check(H5Dopen2(root, kLabelsName, H5P_DEFAULT), H5Dclose,
                                  path + ": cannot open dataset /labels");

    // /images: uint8, rank 4, sane dimensions.
    hsize_t dims[4] = {0, 0, 0, 0};
    {
      h5::Hid type = h5::check(H5Dget_type(h.images.get()), H5Tclose, path);
      if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) != 1 ||
          H5Tget_sign(type.get()) != H5T_SGN_NONE) {
        fail(path, "dataset /images must be uint8");
      }
      h5::Hid space = h5::check(H5Dget_space(h.images.get()), H5Sclose, path);
      const int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank != 4) {
        fail(path,
             "dataset /images has rank " + std::to_string(rank) + ", expected 4 [N, H, W, C]");
      }
      H5Sget_simple_extent_dims(space.get(), dims, nullptr);
    }
    const auto n = static_cast<int64_t>(std::min<hsize_t>(dims[0], INT64_MAX));
    const auto height = static_cast<int64_t>(std::min<hsize_t>(dims[1], INT64_MAX));
    const auto width = static_cast<int64_t>(std::min<hsize_t>(dims[2], INT64_MAX));
    const auto channels = static_cast<int64_t>(std::min<hsize_t>(dims[3], INT64_MAX));
    const std::string shape_text = "[" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) +
                                   ", " + std::to_string(dims[2]) + ", " + std::to_string(dims[3]) +
                                   "]";
    if (n == 0) fail(path, "dataset /images is empty (shape " + shape_text + ")");
    if (n > kMaxSamples || height < 1 || height > kMaxSide || width < 1 || width > kMaxSide ||
        channels < 1 || channels > kMaxChannels) {
      fail(path, "dataset /images has shape " + shape_text + " outside the format's limits (N <= " +
                     std::to_string(kMaxSamples) + ", H and W in [1, " + std::to_string(kMaxSide) +
                     "], C in [1, " + std::to_string(kMaxChannels) + "])");
    }
    h.sample_bytes = height * width * channels;

    // Unfiltered pixels occupy N x H x W x C bytes of the file: a shape larger than the file is
    // a damaged header or a truncated file, and is refused before anything is sized by N.
    h5::Hid fcpl = h5::check(H5Fget_create_plist(root), H5Pclose, path);
    hsize_t userblock = 0;
    H5Pget_userblock(fcpl.get(), &userblock);
    h5::Hid dcpl = h5::check(H5Dget_create_plist(h.images.get()), H5Pclose, path);
    const H5D_layout_t layout = H5Pget_layout(dcpl.get());
    const int nfilters = H5Pget_nfilters(dcpl.get());
    const auto total_bytes = static_cast<uint64_t>(n) * static_cast<uint64_t>(h.sample_bytes);
    if (nfilters == 0 && total_bytes > file_size) {
      fail(path, "dataset /images needs " + std::to_string(total_bytes) +
                     " bytes but the file has " + std::to_string(file_size) +
                     " (truncated file or wrong shape)");
    }

    // /labels: integer, rank 1, one per image.
    {
      h5::Hid type = h5::check(H5Dget_type(labels_ds.get()), H5Tclose, path);
      if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) > 8) {
        fail(path, "dataset /labels must hold integers");
      }
      h5::Hid space = h5::check(H5Dget_space(labels_ds.get()), H5Sclose, path);
      const int rank = H5Sget_simple_extent_ndims(space.get());
      hsize_t ldims[1] = {0};
      if (rank != 1) {
        fail(path, "dataset /labels has rank " + std::to_string(rank) + ", expected 1 [N]");
      }
      H5Sget_simple_extent_dims(space.get(), ldims, nullptr);
      if (ldims[0] != dims[0]) {
        fail(path, "dataset /labels has " + std::to_string(ldims[0]) + " entries but /images has " +
                       std::to_string(dims[0]) + " images");
      }
    }

    // Attributes.
    const auto shape = read_numbers(root, "image_shape", path, 3);
    if (shape.size() != 3 || shape[0] != static_cast<double>(height) ||
        shape[1] != static_cast<double>(width) || shape[2] != static_cast<double>(channels)) {
      fail(path, "attribute 'image_shape' does not match /images shape " + shape_text);
    }
    const int64_t num_classes = read_integer(root, "num_classes", path);
    if (num_classes < 1 || num_classes > kMaxClasses) {
      fail(path, "attribute 'num_classes' is " + std::to_string(num_classes) + ", expected 1.." +
                     std::to_string(kMaxClasses));
    }
    auto class_names = read_strings(root, "class_names", path, kMaxClasses);
    if (static_cast<int64_t>(class_names.size()) != num_classes) {
      fail(path, "attribute 'class_names' has " + std::to_string(class_names.size()) +
                     " names for " + std::to_string(num_classes) + " classes");
    }
    const auto mean = read_numbers(root, "mean", path, kMaxChannels);
    const auto stdev = read_numbers(root, "std", path, kMaxChannels);
    if (static_cast<int64_t>(mean.size()) != channels ||
        static_cast<int64_t>(stdev.size()) != channels) {
      fail(path, "attributes 'mean' and 'std' need one value per channel (" +
                     std::to_string(channels) + ")");
    }
    for (int64_t c = 0; c < channels; ++c) {
      if (!std::isfinite(mean[c]) || !std::isfinite(stdev[c]) || stdev[c] <= 0) {
        fail(path, "attribute 'std' must be positive and 'mean' finite");
      }
    }

    // Layout: decide how pixels are read.
    {
      if (layout == H5D_CHUNKED) {
        hsize_t cdims[4] = {0, 0, 0, 0};
        if (H5Pget_chunk(dcpl.get(), 4, cdims) != 4) fail(path, "dataset /images: bad chunking");
        h.chunk_images = static_cast<int64_t>(cdims[0]);
        const bool whole_images = cdims[1] == dims[1] && cdims[2] == dims[2] && cdims[3] == dims[3];
        if (nfilters == 0 && whole_images && options.direct_reads) {
          const int64_t nchunks = (n + h.chunk_images - 1) / h.chunk_images;
          const uint64_t chunk_bytes =
              static_cast<uint64_t>(h.chunk_images) * static_cast<uint64_t>(h.sample_bytes);
          h.chunk_offset.resize(static_cast<size_t>(nchunks));
          for (int64_t ci = 0; ci < nchunks; ++ci) {
            const hsize_t coord[4] = {static_cast<hsize_t>(ci * h.chunk_images), 0, 0, 0};
            unsigned mask = 0;
            haddr_t addr = HADDR_UNDEF;
            hsize_t size = 0;
            h5::check(H5Dget_chunk_info_by_coord(h.images.get(), coord, &mask, &addr, &size),
                      path + ": cannot locate chunk " + std::to_string(ci) + " of /images");
            if (addr == HADDR_UNDEF || size != chunk_bytes) {
              fail(path, "chunk " + std::to_string(ci) +
                             " of /images was never written "
                             "(incomplete file)");
            }
            if (addr + userblock + size > file_size) {
              fail(path, "chunk " + std::to_string(ci) +
                             " of /images lies past the end of the "
                             "file (truncated file)");
            }
            h.chunk_offset[static_cast<size_t>(ci)] = addr + userblock;
          }
          h.direct = true;
        }
      } else if (layout == H5D_CONTIGUOUS && nfilters == 0 && options.direct_reads) {
        const haddr_t addr = H5Dget_offset(h.images.get());
        if (addr == HADDR_UNDEF) {
          h5::error_text();
          fail(path, "dataset /images has no storage (never written)");
        }
        if (addr + userblock + total_bytes > file_size) {
          fail(path, "dataset /images lies past the end of the file (truncated file)");
        }
        h.contiguous_offset = addr + userblock;
        h.direct = true;
      }
    }

    // Cross-file agreement.
    if (src->files_.empty()) {
      src->info_.height = height;
      src->info_.width = width;
      src->info_.channels = channels;
      src->info_.num_classes = num_classes;
      src->info_.class_names = class_names;
      src->info_.chunk_images = h.chunk_images;
      mean_sum.assign(channels, 0.0);
      std_sum.assign(channels, 0.0);
    } else {
      const DatasetInfo& first = src->info_;
      const std::string& first_path = src->files_.front().path;
      if (first.height != height || first.width != width || first.channels != channels) {
        fail(path, "images are " + std::to_string(height) + "x" + std::to_string(width) + "x" +
                       std::to_string(channels) + " but " + first_path + " has " +
                       std::to_string(first.height) + "x" + std::to_string(first.width) + "x" +
                       std::to_string(first.channels) + " (files of one dataset must match)");
      }
      if (first.num_classes != num_classes || first.class_names != class_names) {
        fail(path, "class names differ from " + first_path + " (files of one dataset must match)");
      }
    }

    // Labels last: the only allocation sized by N, bounded by the checks above.
    const size_t base = src->labels_.size();
    src->labels_.resize(base + static_cast<size_t>(n));
    h5::check(H5Dread(labels_ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                      src->labels_.data() + base),
              path + ": cannot read dataset /labels");
    for (int64_t i = 0; i < n; ++i) {
      const int64_t label = src->labels_[base + static_cast<size_t>(i)];
      if (label < 0 || label >= num_classes) {
        fail(path, "dataset /labels: entry " + std::to_string(i) + " is " + std::to_string(label) +
                       ", outside [0, " + std::to_string(num_classes) + ")");
      }
    }

    for (int64_t c = 0; c < channels; ++c) {
      mean_sum[c] += mean[c] * static_cast<double>(n);
      std_sum[c] += stdev[c] * static_cast<double>(n);
    }
    SourceFile file;
    if (static_cast<int64_t>(total_bytes) <= cache_left && h.direct) {
      // A read-only shared mapping, populated now: one sequential read into the page cache, no
      // copy into private memory, and ranks on one node share the pages.
      cache_left -= static_cast<int64_t>(total_bytes);
      void* m = ::mmap(nullptr, file_size, PROT_READ, MAP_SHARED | MAP_POPULATE, h.fd, 0);
      if (m != MAP_FAILED) {
        h.map = static_cast<const uint8_t*>(m);
        h.map_bytes = file_size;
        file.cached = true;
      }
    } else if (static_cast<int64_t>(total_bytes) <= cache_left) {
      cache_left -= static_cast<int64_t>(total_bytes);
      // Read through the normal path (one large read per chunk), then serve from memory.
      std::vector<uint8_t> pixels(total_bytes);
      src->handles_.push_back(std::move(handle));
      const size_t fi = src->handles_.size() - 1;
      src->read_file(fi, 0, n, pixels.data());
      handle = std::move(src->handles_.back());
      src->handles_.pop_back();
      h.cache = std::move(pixels);
      file.cached = true;
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
  // Per-file statistics combine by sample count; std is an approximation (the mean of the
  // per-file deviations), close enough for normalisation.
  for (size_t c = 0; c < mean_sum.size(); ++c) {
    src->info_.mean.push_back(mean_sum[c] / static_cast<double>(src->info_.num_samples));
    src->info_.std.push_back(std_sum[c] / static_cast<double>(src->info_.num_samples));
  }
  return src;
}

ImageSource::~ImageSource() = default;

void ImageSource::read(int64_t first, int64_t count, uint8_t* dst) const {
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

void ImageSource::read_samples(const int64_t* samples, int64_t n, uint8_t* dst) const {
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
  const auto sb = static_cast<uint64_t>(info_.sample_bytes());
  // Merged like reads: fewer, larger requests, and the gaps are as small as the reads'.
  const int64_t gap = std::max<int64_t>(0, merge_gap(options_, info_.sample_bytes()));
  for (size_t a = 0; a < pieces.size();) {
    uint64_t end = pieces[a].offset + sb;
    size_t b = a + 1;
    while (b < pieces.size() && pieces[b].file == pieces[a].file &&
           pieces[b].offset <= end + static_cast<uint64_t>(gap)) {
      end = std::max(end, pieces[b].offset + sb);
      ++b;
    }
    ::posix_fadvise(handles_[pieces[a].file]->fd, static_cast<off_t>(pieces[a].offset),
                    static_cast<off_t>(end - pieces[a].offset), POSIX_FADV_WILLNEED);
    a = b;
  }
}

}  // namespace hpctrain::data
