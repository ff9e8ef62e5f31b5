#include "data/format.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "data/h5.hpp"

namespace hpctrain::data {

int64_t default_chunk_images(int64_t sample_bytes) {
  return std::max<int64_t>(1, kTargetChunkBytes / std::max<int64_t>(1, sample_bytes));
}

namespace {

void write_attr(hid_t obj, const char* name, hid_t type, const std::vector<hsize_t>& dims,
                const void* data, const std::string& where) {
  h5::Hid space =
      dims.empty()
          ? h5::check(H5Screate(H5S_SCALAR), H5Sclose, where)
          : h5::check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                      H5Sclose, where);
  h5::Hid attr = h5::check(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                           H5Aclose, where + ": cannot create attribute '" + name + "'");
  h5::check(H5Awrite(attr.get(), type, data), where + ": cannot write attribute '" + name + "'");
}

h5::Hid utf8_vlen_string(const std::string& where) {
  h5::Hid type = h5::check(H5Tcopy(H5T_C_S1), H5Tclose, where);
  h5::check(H5Tset_size(type.get(), H5T_VARIABLE), where);
  h5::check(H5Tset_cset(type.get(), H5T_CSET_UTF8), where);
  return type;
}

void write_string_attr(hid_t obj, const char* name, const std::vector<std::string>& values,
                       bool scalar, const std::string& where) {
  h5::Hid type = utf8_vlen_string(where);
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  std::vector<hsize_t> dims;
  if (!scalar) dims.push_back(values.size());
  write_attr(obj, name, type.get(), dims, ptrs.data(), where);
}

// Creates /name, `rows` x `cols` (cols 0: 1-D) of `file_type`, chunked with a fletcher32
// checksum, and writes `data` (of memory type `mem_type`) whole.
void write_checksummed(hid_t file, const char* name, hid_t file_type, hid_t mem_type, hsize_t rows,
                       hsize_t cols, const void* data, const std::string& path) {
  const int rank = cols == 0 ? 1 : 2;
  const hsize_t dims[2] = {rows, cols};
  const hsize_t chunk[2] = {std::min<hsize_t>(rows, 65536), cols};
  h5::Hid space = h5::check(H5Screate_simple(rank, dims, nullptr), H5Sclose, path);
  h5::Hid dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, path);
  h5::check(H5Pset_chunk(dcpl.get(), rank, chunk), path);
  h5::check(H5Pset_fletcher32(dcpl.get()), path);
  h5::check(H5Pset_obj_track_times(dcpl.get(), false), path);  // the same input, the same bytes
  h5::Hid dset = h5::check(
      H5Dcreate2(file, name, file_type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose, path + ": cannot create /" + name);
  h5::check(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
            path + ": cannot write /" + name);
}

// Version-1.10 object headers carry checksums, so a flipped bit in the metadata is reported
// instead of being read as a different shape.
h5::Hid create_file(const std::string& path) {
  h5::Hid fapl = h5::check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, path);
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110), path);
  h5::check(H5Pset_file_locking(fapl.get(), false, true), path);
  // No time stamps in the root group: the same samples give the same file, byte for byte.
  h5::Hid fcpl = h5::check(H5Pcreate(H5P_FILE_CREATE), H5Pclose, path);
  h5::check(H5Pset_obj_track_times(fcpl.get(), false), path);
  return h5::check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose,
                   path + ": cannot create file");
}

// mean and std on the [0, 1] scale from sums of 0..255 values.
void finish_stats(const std::vector<double>& sum, const std::vector<double>& sum_sq, double count,
                  DatasetInfo& info) {
  for (size_t ch = 0; ch < sum.size(); ++ch) {
    const double mean = count > 0 ? sum[ch] / count : 127.5;
    const double var = count > 0 ? std::max(0.0, sum_sq[ch] / count - mean * mean) : 0.0;
    info.mean.push_back(mean / 255.0);
    // A constant channel would divide by zero when normalising; 1.0 leaves it centred only.
    const double sd = std::sqrt(var) / 255.0;
    info.std.push_back(sd > 0 ? sd : 1.0);
  }
}

// The attributes both versions carry.
void write_common_attributes(hid_t root, int64_t version, const DatasetInfo& info,
                             const std::string& where) {
  write_string_attr(root, kFormatAttr, {kFormatName}, /*scalar=*/true, where);
  write_attr(root, kFormatVersionAttr, H5T_NATIVE_INT64, {}, &version, where);
  write_attr(root, kNumClassesAttr, H5T_NATIVE_INT64, {}, &info.num_classes, where);
  write_string_attr(root, kClassNamesAttr, info.class_names, /*scalar=*/false, where);
  const int64_t shape[3] = {info.height, info.width, info.channels};
  write_attr(root, kImageShapeAttr, H5T_NATIVE_INT64, {3}, shape, where);
  write_attr(root, kMeanAttr, H5T_NATIVE_DOUBLE, {info.mean.size()}, info.mean.data(), where);
  write_attr(root, kStdAttr, H5T_NATIVE_DOUBLE, {info.std.size()}, info.std.data(), where);
}

}  // namespace

void PixelStats::add(const uint8_t* pixels_hwc, int64_t count, int64_t channels, int64_t stride) {
  if (sum.empty()) {
    sum.assign(static_cast<size_t>(channels), 0.0);
    sum_sq.assign(static_cast<size_t>(channels), 0.0);
  }
  const auto c = static_cast<size_t>(channels);
  if (sum.size() != c) HPCTRAIN_THROW(rt::DataError, "pixel statistics: channel count changed");
  // Integer sums per call (exact), folded into doubles once.
  std::vector<uint64_t> s(c, 0), sq(c, 0);
  int64_t n = 0;
  for (int64_t p = 0; p < count; p += std::max<int64_t>(1, stride), ++n) {
    for (size_t ch = 0; ch < c; ++ch) {
      const uint64_t v = pixels_hwc[static_cast<size_t>(p) * c + ch];
      s[ch] += v;
      sq[ch] += v * v;
    }
  }
  for (size_t ch = 0; ch < c; ++ch) {
    sum[ch] += static_cast<double>(s[ch]);
    sum_sq[ch] += static_cast<double>(sq[ch]);
  }
  pixels += static_cast<double>(n);
}

void PixelStats::merge(const PixelStats& other) {
  if (other.sum.empty()) return;
  if (sum.empty()) {
    *this = other;
    return;
  }
  if (sum.size() != other.sum.size()) {
    HPCTRAIN_THROW(rt::DataError, "pixel statistics: channel count changed");
  }
  for (size_t ch = 0; ch < sum.size(); ++ch) {
    sum[ch] += other.sum[ch];
    sum_sq[ch] += other.sum_sq[ch];
  }
  pixels += other.pixels;
}

struct DatasetWriter::State {
  std::string path;
  int64_t n = 0, h = 0, w = 0, c = 0;
  std::vector<std::string> class_names;
  int64_t chunk = 0;
  h5::Hid file, images, labels;
  std::vector<uint64_t> sum, sum_sq;
  int64_t written = 0;  // samples; ranges are trusted not to overlap
  bool finished = false;
};

DatasetWriter::DatasetWriter(const std::string& path, int64_t num_samples, int64_t height,
                             int64_t width, int64_t channels, std::vector<std::string> class_names,
                             const WriterOptions& options)
    : state_(std::make_unique<State>()) {
  h5::quiet();
  State& s = *state_;
  s.path = path;
  s.n = num_samples;
  s.h = height;
  s.w = width;
  s.c = channels;
  s.class_names = std::move(class_names);
  if (num_samples < 1 || num_samples > kMaxSamples || height < 1 || height > kMaxSide ||
      width < 1 || width > kMaxSide || channels < 1 || channels > kMaxChannels ||
      s.class_names.empty() || static_cast<int64_t>(s.class_names.size()) > kMaxClasses) {
    HPCTRAIN_THROW(rt::DataError,
                   path + ": cannot write a dataset of " + std::to_string(num_samples) + " x " +
                       std::to_string(height) + " x " + std::to_string(width) + " x " +
                       std::to_string(channels) + " with " + std::to_string(s.class_names.size()) +
                       " classes (outside the format's limits)");
  }
  const int64_t sample_bytes = height * width * channels;
  s.chunk = std::min(num_samples, options.chunk_images > 0 ? options.chunk_images
                                                           : default_chunk_images(sample_bytes));
  s.sum.assign(channels, 0);
  s.sum_sq.assign(channels, 0);

  s.file = create_file(path);

  const hsize_t dims[4] = {static_cast<hsize_t>(num_samples), static_cast<hsize_t>(height),
                           static_cast<hsize_t>(width), static_cast<hsize_t>(channels)};
  const hsize_t chunk[4] = {static_cast<hsize_t>(s.chunk), dims[1], dims[2], dims[3]};
  {
    h5::Hid space = h5::check(H5Screate_simple(4, dims, nullptr), H5Sclose, path);
    h5::Hid dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, path);
    h5::check(H5Pset_chunk(dcpl.get(), 4, chunk), path);
    // Allocate every chunk at creation so a reader can map chunk -> file offset once at open.
    h5::check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), path);
    s.images = h5::check(H5Dcreate2(s.file.get(), kImagesName, H5T_STD_U8LE, space.get(),
                                    H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                         H5Dclose, path + ": cannot create /images");
  }
  {
    const hsize_t ldims[1] = {dims[0]};
    const hsize_t lchunk[1] = {std::min<hsize_t>(dims[0], 65536)};
    h5::Hid space = h5::check(H5Screate_simple(1, ldims, nullptr), H5Sclose, path);
    h5::Hid dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, path);
    h5::check(H5Pset_chunk(dcpl.get(), 1, lchunk), path);
    // Labels are small and read whole at open; a checksum catches a flipped label.
    h5::check(H5Pset_fletcher32(dcpl.get()), path);
    s.labels = h5::check(H5Dcreate2(s.file.get(), kLabelsName, H5T_STD_I64LE, space.get(),
                                    H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                         H5Dclose, path + ": cannot create /labels");
  }
}

DatasetWriter::~DatasetWriter() = default;

void DatasetWriter::write(int64_t first, int64_t count, const uint8_t* images,
                          const int64_t* labels) {
  State& s = *state_;
  h5::quiet();
  if (s.finished) HPCTRAIN_THROW(rt::DataError, s.path + ": write after finish");
  if (first < 0 || count < 0 || first + count > s.n) {
    HPCTRAIN_THROW(rt::DataError, s.path + ": write of [" + std::to_string(first) + ", " +
                                      std::to_string(first + count) + ") outside [0, " +
                                      std::to_string(s.n) + ")");
  }
  if (count == 0) return;
  const auto num_classes = static_cast<int64_t>(s.class_names.size());
  for (int64_t i = 0; i < count; ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      HPCTRAIN_THROW(rt::DataError, s.path + ": label " + std::to_string(labels[i]) +
                                        " of sample " + std::to_string(first + i) +
                                        " outside [0, " + std::to_string(num_classes) + ")");
    }
  }
  const int64_t pixels = count * s.h * s.w;
  for (int64_t p = 0; p < pixels; ++p) {
    for (int64_t ch = 0; ch < s.c; ++ch) {
      const uint64_t v = images[p * s.c + ch];
      s.sum[ch] += v;
      s.sum_sq[ch] += v * v;
    }
  }
  h5::write_rows(s.images.get(), H5T_NATIVE_UINT8, first, count, images,
                 s.path + ": cannot write /images");
  h5::write_rows(s.labels.get(), H5T_NATIVE_INT64, first, count, labels,
                 s.path + ": cannot write /labels");
  s.written += count;
}

DatasetInfo DatasetWriter::finish() {
  State& s = *state_;
  h5::quiet();
  if (s.written != s.n) {
    HPCTRAIN_THROW(rt::DataError, s.path + ": finish after writing " + std::to_string(s.written) +
                                      " of " + std::to_string(s.n) + " samples");
  }
  DatasetInfo info;
  info.num_samples = s.n;
  info.height = s.h;
  info.width = s.w;
  info.channels = s.c;
  info.num_classes = static_cast<int64_t>(s.class_names.size());
  info.class_names = s.class_names;
  info.chunk_images = s.chunk;
  std::vector<double> sum(s.sum.begin(), s.sum.end()), sum_sq(s.sum_sq.begin(), s.sum_sq.end());
  finish_stats(sum, sum_sq, static_cast<double>(s.n * s.h * s.w), info);
  const hid_t root = s.file.get();
  const std::string& where = s.path;
  write_common_attributes(root, kFormatVersion, info, where);
  s.images.reset();
  s.labels.reset();
  h5::check(H5Fflush(root, H5F_SCOPE_GLOBAL), where + ": cannot flush");
  s.file.reset();
  s.finished = true;
  return info;
}

// Version 2 -------------------------------------------------------------------------------------

struct EncodedDatasetWriter::State {
  std::string path, writer;
  std::vector<std::string> class_names;
  int64_t channels = 0;
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> offsets{0};
  std::vector<int32_t> shapes;  // [N, 2]
  std::vector<int64_t> labels;
  int64_t max_h = 0, max_w = 0;
  PixelStats stats;
  std::vector<std::pair<std::string, std::string>> text_attrs;
  std::vector<std::pair<std::string, int64_t>> int_attrs;
};

EncodedDatasetWriter::EncodedDatasetWriter(std::string path, std::vector<std::string> class_names,
                                           int64_t channels, std::string writer)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.path = std::move(path);
  s.class_names = std::move(class_names);
  s.channels = channels;
  s.writer = std::move(writer);
  if (s.class_names.empty() || static_cast<int64_t>(s.class_names.size()) > kMaxClasses ||
      (channels != 1 && channels != 3)) {
    HPCTRAIN_THROW(rt::DataError, s.path + ": cannot write encoded samples of " +
                                      std::to_string(channels) + " channels in " +
                                      std::to_string(s.class_names.size()) +
                                      " classes (outside the format's limits)");
  }
}

EncodedDatasetWriter::~EncodedDatasetWriter() = default;

int64_t EncodedDatasetWriter::size() const { return static_cast<int64_t>(state_->labels.size()); }

void EncodedDatasetWriter::add(const uint8_t* bytes, size_t size, int64_t height, int64_t width,
                               int64_t label) {
  State& s = *state_;
  const int64_t index = this->size();
  if (size == 0 || static_cast<int64_t>(size) > kMaxEncodedSampleBytes || height < 1 ||
      height > kMaxSide || width < 1 || width > kMaxSide || index >= kMaxSamples) {
    HPCTRAIN_THROW(rt::DataError, s.path + ": sample " + std::to_string(index) + " (" +
                                      std::to_string(size) + " bytes, " + std::to_string(height) +
                                      "x" + std::to_string(width) +
                                      ") is outside the format's limits");
  }
  if (label < 0 || label >= static_cast<int64_t>(s.class_names.size())) {
    HPCTRAIN_THROW(rt::DataError, s.path + ": label " + std::to_string(label) + " of sample " +
                                      std::to_string(index) + " outside [0, " +
                                      std::to_string(s.class_names.size()) + ")");
  }
  s.bytes.insert(s.bytes.end(), bytes, bytes + size);
  s.offsets.push_back(s.bytes.size());
  s.shapes.push_back(static_cast<int32_t>(height));
  s.shapes.push_back(static_cast<int32_t>(width));
  s.labels.push_back(label);
  s.max_h = std::max(s.max_h, height);
  s.max_w = std::max(s.max_w, width);
}

void EncodedDatasetWriter::add_stats(const PixelStats& stats) { state_->stats.merge(stats); }

void EncodedDatasetWriter::set_attribute(const std::string& name, const std::string& value) {
  state_->text_attrs.emplace_back(name, value);
}

void EncodedDatasetWriter::set_attribute(const std::string& name, int64_t value) {
  state_->int_attrs.emplace_back(name, value);
}

DatasetInfo EncodedDatasetWriter::finish() {
  State& s = *state_;
  h5::quiet();
  const auto n = static_cast<hsize_t>(s.labels.size());
  if (n == 0) HPCTRAIN_THROW(rt::DataError, s.path + ": no samples to write");
  DatasetInfo info;
  info.num_samples = static_cast<int64_t>(n);
  info.encoding = Encoding::kJpeg;
  info.height = s.max_h;
  info.width = s.max_w;
  info.channels = s.channels;
  info.num_classes = static_cast<int64_t>(s.class_names.size());
  info.class_names = s.class_names;
  if (!s.stats.sum.empty() && static_cast<int64_t>(s.stats.sum.size()) != s.channels) {
    HPCTRAIN_THROW(rt::DataError, s.path + ": pixel statistics have " +
                                      std::to_string(s.stats.sum.size()) + " channels, samples " +
                                      std::to_string(s.channels));
  }
  std::vector<double> zeros(static_cast<size_t>(s.channels), 0.0);
  finish_stats(s.stats.sum.empty() ? zeros : s.stats.sum,
               s.stats.sum.empty() ? zeros : s.stats.sum_sq, s.stats.pixels, info);

  h5::Hid file = create_file(s.path);
  {
    // Contiguous, unfiltered and allocated at creation: readers find it with one
    // H5Dget_offset and read samples with pread(2).
    const hsize_t dims[1] = {static_cast<hsize_t>(s.bytes.size())};
    h5::Hid space = h5::check(H5Screate_simple(1, dims, nullptr), H5Sclose, s.path);
    h5::Hid dcpl = h5::check(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, s.path);
    h5::check(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), s.path);
    h5::check(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), s.path);
    h5::check(H5Pset_obj_track_times(dcpl.get(), false), s.path);
    h5::Hid dset = h5::check(H5Dcreate2(file.get(), kEncodedName, H5T_STD_U8LE, space.get(),
                                        H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                             H5Dclose, s.path + ": cannot create /encoded");
    h5::check(H5Dwrite(dset.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.bytes.data()),
              s.path + ": cannot write /encoded");
  }
  write_checksummed(file.get(), kOffsetsName, H5T_STD_U64LE, H5T_NATIVE_UINT64, n + 1, 0,
                    s.offsets.data(), s.path);
  write_checksummed(file.get(), kShapesName, H5T_STD_I32LE, H5T_NATIVE_INT32, n, 2, s.shapes.data(),
                    s.path);
  write_checksummed(file.get(), kLabelsName, H5T_STD_I64LE, H5T_NATIVE_INT64, n, 0, s.labels.data(),
                    s.path);
  const hid_t root = file.get();
  write_common_attributes(root, kFormatVersionEncoded, info, s.path);
  write_string_attr(root, kEncodingAttr, {kJpegEncoding}, /*scalar=*/true, s.path);
  write_string_attr(root, kWriterAttr, {s.writer}, /*scalar=*/true, s.path);
  for (const auto& [name, value] : s.text_attrs) {
    write_string_attr(root, name.c_str(), {value}, /*scalar=*/true, s.path);
  }
  for (const auto& [name, value] : s.int_attrs) {
    write_attr(root, name.c_str(), H5T_NATIVE_INT64, {}, &value, s.path);
  }
  h5::check(H5Fflush(root, H5F_SCOPE_GLOBAL), s.path + ": cannot flush");
  return info;
}

// Reading --------------------------------------------------------------------------------------

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  HPCTRAIN_THROW(rt::DatasetFormatError, path + ": " + what);
}

std::string attr_text(const char* name) { return std::string("attribute '") + name + "'"; }

h5::Hid open_attr(hid_t obj, const char* name, const std::string& path) {
  const htri_t exists = H5Aexists(obj, name);
  if (exists <= 0) {
    h5::error_text();
    fail(path, std::string("missing root attribute '") + name +
                   "'; not an hpctrain dataset (convert it with hpctrain-data)");
  }
  return h5::check(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose,
                   path + ": cannot open " + attr_text(name));
}

// Number of elements of an attribute, checked against max_elements before anything is read.
hsize_t attr_elements(hid_t attr, const char* name, const std::string& path, hsize_t max_elements) {
  h5::Hid space = h5::check(H5Aget_space(attr), H5Sclose, path);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0 || H5Sget_simple_extent_ndims(space.get()) > 1) {
    fail(path, attr_text(name) + " is not a scalar or 1-D array");
  }
  if (static_cast<hsize_t>(n) > max_elements) {
    fail(path, attr_text(name) + " has " + std::to_string(n) + " elements (at most " +
                   std::to_string(max_elements) + " expected)");
  }
  return static_cast<hsize_t>(n);
}

std::vector<double> read_numbers(hid_t obj, const char* name, const std::string& path,
                                 hsize_t max_elements) {
  h5::Hid attr = open_attr(obj, name, path);
  h5::Hid type = h5::check(H5Aget_type(attr.get()), H5Tclose, path);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER && cls != H5T_FLOAT) fail(path, attr_text(name) + " is not numeric");
  std::vector<double> values(attr_elements(attr.get(), name, path, max_elements));
  if (!values.empty()) {
    h5::check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, values.data()),
              path + ": cannot read " + attr_text(name));
  }
  return values;
}

int64_t read_integer(hid_t obj, const char* name, const std::string& path) {
  h5::Hid attr = open_attr(obj, name, path);
  h5::Hid type = h5::check(H5Aget_type(attr.get()), H5Tclose, path);
  if (H5Tget_class(type.get()) != H5T_INTEGER) fail(path, attr_text(name) + " is not an integer");
  if (attr_elements(attr.get(), name, path, 1) != 1) fail(path, attr_text(name) + " is empty");
  int64_t value = 0;
  h5::check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value),
            path + ": cannot read " + attr_text(name));
  return value;
}

std::vector<std::string> read_strings(hid_t obj, const char* name, const std::string& path,
                                      hsize_t max_elements) {
  h5::Hid attr = open_attr(obj, name, path);
  h5::Hid ftype = h5::check(H5Aget_type(attr.get()), H5Tclose, path);
  if (H5Tget_class(ftype.get()) != H5T_STRING) fail(path, attr_text(name) + " is not a string");
  const hsize_t n = attr_elements(attr.get(), name, path, max_elements);
  std::vector<std::string> out;
  if (n == 0) return out;
  if (H5Tis_variable_str(ftype.get()) > 0) {
    h5::Hid mtype = h5::check(H5Tcopy(H5T_C_S1), H5Tclose, path);
    H5Tset_size(mtype.get(), H5T_VARIABLE);
    H5Tset_cset(mtype.get(), H5Tget_cset(ftype.get()));
    std::vector<char*> ptrs(n, nullptr);
    h5::check(H5Aread(attr.get(), mtype.get(), ptrs.data()),
              path + ": cannot read " + attr_text(name));
    for (char* p : ptrs) out.emplace_back(p != nullptr ? p : "");
    h5::Hid space = h5::check(H5Aget_space(attr.get()), H5Sclose, path);
    H5Dvlen_reclaim(mtype.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const size_t size = H5Tget_size(ftype.get());
    if (size == 0 || size > 4096) fail(path, attr_text(name) + " is malformed");
    h5::Hid mtype = h5::check(H5Tcopy(H5T_C_S1), H5Tclose, path);
    H5Tset_size(mtype.get(), size);
    std::vector<char> buf(n * size);
    h5::check(H5Aread(attr.get(), mtype.get(), buf.data()),
              path + ": cannot read " + attr_text(name));
    for (hsize_t i = 0; i < n; ++i) {
      const char* p = buf.data() + i * size;
      out.emplace_back(p, strnlen(p, size));
    }
  }
  return out;
}

// Identity first: a wrong file should say so, not complain about a missing dataset. Returns the
// version (1 or 2).
int64_t check_identity(hid_t root, const std::string& path) {
  const auto format = read_strings(root, kFormatAttr, path, 1);
  if (format.size() != 1 || format[0] != kFormatName) {
    fail(path, attr_text(kFormatAttr) + " is '" + (format.empty() ? "" : format[0]) +
                   "', expected '" + kFormatName + "'");
  }
  const int64_t version = read_integer(root, kFormatVersionAttr, path);
  if (version != kFormatVersion && version != kFormatVersionEncoded) {
    fail(path, "format version " + std::to_string(version) +
                   " is not supported (this build reads versions " +
                   std::to_string(kFormatVersion) + " and " +
                   std::to_string(kFormatVersionEncoded) + ")");
  }
  return version;
}

// /images: uint8, rank 4. Its dimensions [N, H, W, C] go to dims.
void check_images(hid_t images, const std::string& path, hsize_t (&dims)[4]) {
  h5::Hid type = h5::check(H5Dget_type(images), H5Tclose, path);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) != 1 ||
      H5Tget_sign(type.get()) != H5T_SGN_NONE) {
    fail(path, "dataset /images must be uint8");
  }
  h5::Hid space = h5::check(H5Dget_space(images), H5Sclose, path);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank != 4) {
    fail(path, "dataset /images has rank " + std::to_string(rank) + ", expected 4 [N, H, W, C]");
  }
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
}

// /labels: integer, rank 1, one per image.
void check_labels(hid_t labels, const std::string& path, hsize_t num_images) {
  h5::Hid type = h5::check(H5Dget_type(labels), H5Tclose, path);
  if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) > 8) {
    fail(path, "dataset /labels must hold integers");
  }
  h5::Hid space = h5::check(H5Dget_space(labels), H5Sclose, path);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank != 1) {
    fail(path, "dataset /labels has rank " + std::to_string(rank) + ", expected 1 [N]");
  }
  hsize_t count[1] = {0};
  H5Sget_simple_extent_dims(space.get(), count, nullptr);
  if (count[0] != num_images) {
    fail(path, "dataset /labels has " + std::to_string(count[0]) + " entries but /images has " +
                   std::to_string(num_images) + " images");
  }
}

// The root attributes that describe the images: they must agree with /images's shape.
void read_attributes(hid_t root, const std::string& path, const std::string& shape_text,
                     DatasetInfo& info) {
  const auto shape = read_numbers(root, kImageShapeAttr, path, 3);
  if (shape.size() != 3 || shape[0] != static_cast<double>(info.height) ||
      shape[1] != static_cast<double>(info.width) ||
      shape[2] != static_cast<double>(info.channels)) {
    fail(path, attr_text(kImageShapeAttr) + " does not match /images shape " + shape_text);
  }
  info.num_classes = read_integer(root, kNumClassesAttr, path);
  if (info.num_classes < 1 || info.num_classes > kMaxClasses) {
    fail(path, attr_text(kNumClassesAttr) + " is " + std::to_string(info.num_classes) +
                   ", expected 1.." + std::to_string(kMaxClasses));
  }
  info.class_names = read_strings(root, kClassNamesAttr, path, kMaxClasses);
  if (static_cast<int64_t>(info.class_names.size()) != info.num_classes) {
    fail(path, attr_text(kClassNamesAttr) + " has " + std::to_string(info.class_names.size()) +
                   " names for " + std::to_string(info.num_classes) + " classes");
  }
  info.mean = read_numbers(root, kMeanAttr, path, kMaxChannels);
  info.std = read_numbers(root, kStdAttr, path, kMaxChannels);
  if (static_cast<int64_t>(info.mean.size()) != info.channels ||
      static_cast<int64_t>(info.std.size()) != info.channels) {
    fail(path, std::string("attributes '") + kMeanAttr + "' and '" + kStdAttr +
                   "' need one value per channel (" + std::to_string(info.channels) + ")");
  }
  for (int64_t c = 0; c < info.channels; ++c) {
    if (!std::isfinite(info.mean[c]) || !std::isfinite(info.std[c]) || info.std[c] <= 0) {
      fail(path, attr_text(kStdAttr) + " must be positive and '" + kMeanAttr + "' finite");
    }
  }
}

// Fills header.userblock and header.filtered from /name's storage. Unfiltered samples occupy
// pixel_bytes() of the file: a shape larger than the file is a damaged header or a truncated file,
// and is refused before anything is sized by N. Returns /name's creation property list.
h5::Hid check_storage(hid_t root, hid_t dset, const char* name, const std::string& path,
                      uint64_t file_size, DatasetHeader& header) {
  h5::Hid fcpl = h5::check(H5Fget_create_plist(root), H5Pclose, path);
  hsize_t userblock = 0;
  H5Pget_userblock(fcpl.get(), &userblock);
  header.userblock = userblock;
  h5::Hid dcpl = h5::check(H5Dget_create_plist(dset), H5Pclose, path);
  header.filtered = H5Pget_nfilters(dcpl.get()) != 0;
  if (!header.filtered && header.pixel_bytes() > file_size) {
    fail(path, std::string("dataset /") + name + " needs " + std::to_string(header.pixel_bytes()) +
                   " bytes but the file has " + std::to_string(file_size) +
                   " (truncated file or wrong shape)");
  }
  return dcpl;
}

// A dataset of integers (at most 8 bytes each) of rank `rank`; its dimensions go to dims.
void check_integer_dataset(hid_t dset, const char* name, int rank, bool unsigned_bytes,
                           const std::string& path, hsize_t* dims) {
  h5::Hid type = h5::check(H5Dget_type(dset), H5Tclose, path);
  const bool ok =
      H5Tget_class(type.get()) == H5T_INTEGER &&
      (unsigned_bytes ? H5Tget_size(type.get()) == 1 && H5Tget_sign(type.get()) == H5T_SGN_NONE
                      : H5Tget_size(type.get()) <= 8);
  if (!ok) {
    fail(path, std::string("dataset /") + name +
                   (unsigned_bytes ? " must be uint8" : " must hold integers"));
  }
  h5::Hid space = h5::check(H5Dget_space(dset), H5Sclose, path);
  const int got = H5Sget_simple_extent_ndims(space.get());
  if (got != rank) {
    fail(path, std::string("dataset /") + name + " has rank " + std::to_string(got) +
                   ", expected " + std::to_string(rank));
  }
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
}

// Version 2's datasets and attributes, up to (not including) the per-sample index.
void read_encoded_header(const h5::Hid& file, const std::string& path, uint64_t file_size,
                         DatasetHeader& header) {
  const hid_t root = file.get();
  for (const char* name : {kEncodedName, kOffsetsName, kShapesName, kLabelsName}) {
    if (H5Lexists(root, name, H5P_DEFAULT) <= 0) {
      h5::error_text();
      fail(path, std::string("dataset /") + name + " is missing (format version 2)");
    }
  }
  const auto encoding = read_strings(root, kEncodingAttr, path, 1);
  if (encoding.size() != 1 || encoding[0] != kJpegEncoding) {
    fail(path, attr_text(kEncodingAttr) + " is '" + (encoding.empty() ? "" : encoding[0]) +
                   "', expected '" + kJpegEncoding + "'");
  }
  DatasetInfo& info = header.info;
  info.encoding = Encoding::kJpeg;
  h5::Hid encoded = open_dataset(file, kEncodedName, path);
  hsize_t edims[1] = {0}, odims[1] = {0}, sdims[2] = {0, 0};
  check_integer_dataset(encoded.get(), kEncodedName, 1, /*unsigned_bytes=*/true, path, edims);
  h5::Hid offsets = open_dataset(file, kOffsetsName, path);
  check_integer_dataset(offsets.get(), kOffsetsName, 1, false, path, odims);
  h5::Hid shapes = open_dataset(file, kShapesName, path);
  check_integer_dataset(shapes.get(), kShapesName, 2, false, path, sdims);
  if (odims[0] < 2)
    fail(path, "dataset /offsets has " + std::to_string(odims[0]) + " entries; no samples");
  const hsize_t n = odims[0] - 1;
  if (n > static_cast<hsize_t>(kMaxSamples)) {
    fail(path, "dataset /offsets has " + std::to_string(odims[0]) + " entries (at most " +
                   std::to_string(kMaxSamples) + " samples)");
  }
  if (sdims[0] != n || sdims[1] != 2) {
    fail(path, "dataset /shapes is [" + std::to_string(sdims[0]) + ", " + std::to_string(sdims[1]) +
                   "], expected [" + std::to_string(n) + ", 2] (height, width per sample)");
  }
  info.num_samples = static_cast<int64_t>(n);
  header.encoded_bytes = edims[0];

  h5::Hid dcpl = check_storage(root, encoded.get(), kEncodedName, path, file_size, header);
  h5::Hid labels = open_dataset(file, kLabelsName, path);
  check_labels(labels.get(), path, n);

  // image_shape is [largest height, largest width, channels].
  const auto shape = read_numbers(root, kImageShapeAttr, path, 3);
  if (shape.size() != 3 || !(shape[0] >= 1 && shape[0] <= kMaxSide) ||
      !(shape[1] >= 1 && shape[1] <= kMaxSide) || !(shape[2] == 1 || shape[2] == 3)) {
    fail(path, attr_text(kImageShapeAttr) +
                   " must be [largest height, largest width, channels] with sides in [1, " +
                   std::to_string(kMaxSide) + "] and 1 or 3 channels");
  }
  info.height = static_cast<int64_t>(shape[0]);
  info.width = static_cast<int64_t>(shape[1]);
  info.channels = static_cast<int64_t>(shape[2]);
  read_attributes(root, path, "(encoded)", info);
  header.storage = H5Pget_layout(dcpl.get()) == H5D_CONTIGUOUS ? DatasetHeader::Storage::kContiguous
                                                               : DatasetHeader::Storage::kOther;
}

}  // namespace

h5::Hid open_dataset(const h5::Hid& file, const char* name, const std::string& path) {
  return h5::check(H5Dopen2(file.get(), name, H5P_DEFAULT), H5Dclose,
                   path + ": cannot open dataset /" + name);
}

DatasetHeader read_header(const h5::Hid& file, const std::string& path, uint64_t file_size) {
  h5::quiet();
  const hid_t root = file.get();
  if (check_identity(root, path) == kFormatVersionEncoded) {
    DatasetHeader header;
    read_encoded_header(file, path, file_size, header);
    return header;
  }
  for (const char* name : {kImagesName, kLabelsName}) {
    if (H5Lexists(root, name, H5P_DEFAULT) <= 0) {
      h5::error_text();
      fail(path, std::string("dataset /") + name + " is missing");
    }
  }
  h5::Hid images = open_dataset(file, kImagesName, path);
  h5::Hid labels = open_dataset(file, kLabelsName, path);

  hsize_t dims[4] = {0, 0, 0, 0};
  check_images(images.get(), path, dims);
  DatasetHeader header;
  DatasetInfo& info = header.info;
  info.num_samples = static_cast<int64_t>(std::min<hsize_t>(dims[0], INT64_MAX));
  info.height = static_cast<int64_t>(std::min<hsize_t>(dims[1], INT64_MAX));
  info.width = static_cast<int64_t>(std::min<hsize_t>(dims[2], INT64_MAX));
  info.channels = static_cast<int64_t>(std::min<hsize_t>(dims[3], INT64_MAX));
  const std::string shape_text = "[" + std::to_string(dims[0]) + ", " + std::to_string(dims[1]) +
                                 ", " + std::to_string(dims[2]) + ", " + std::to_string(dims[3]) +
                                 "]";
  if (info.num_samples == 0) fail(path, "dataset /images is empty (shape " + shape_text + ")");
  if (info.num_samples > kMaxSamples || info.height < 1 || info.height > kMaxSide ||
      info.width < 1 || info.width > kMaxSide || info.channels < 1 ||
      info.channels > kMaxChannels) {
    fail(path, "dataset /images has shape " + shape_text + " outside the format's limits (N <= " +
                   std::to_string(kMaxSamples) + ", H and W in [1, " + std::to_string(kMaxSide) +
                   "], C in [1, " + std::to_string(kMaxChannels) + "])");
  }

  h5::Hid dcpl = check_storage(root, images.get(), kImagesName, path, file_size, header);

  check_labels(labels.get(), path, dims[0]);
  read_attributes(root, path, shape_text, info);

  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CHUNKED: {
      hsize_t chunk[4] = {0, 0, 0, 0};
      if (H5Pget_chunk(dcpl.get(), 4, chunk) != 4) fail(path, "dataset /images: bad chunking");
      header.storage = DatasetHeader::Storage::kChunked;
      info.chunk_images = static_cast<int64_t>(chunk[0]);
      header.whole_image_chunks = chunk[1] == dims[1] && chunk[2] == dims[2] && chunk[3] == dims[3];
      break;
    }
    case H5D_CONTIGUOUS:
      header.storage = DatasetHeader::Storage::kContiguous;
      break;
    default:
      header.storage = DatasetHeader::Storage::kOther;
  }
  return header;
}

void read_labels(const h5::Hid& file, const DatasetHeader& header, const std::string& path,
                 int64_t* dst) {
  h5::quiet();
  h5::Hid labels = open_dataset(file, kLabelsName, path);
  h5::check(H5Dread(labels.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst),
            path + ": cannot read dataset /labels");
  const int64_t num_classes = header.info.num_classes;
  for (int64_t i = 0; i < header.info.num_samples; ++i) {
    if (dst[i] < 0 || dst[i] >= num_classes) {
      fail(path, "dataset /labels: entry " + std::to_string(i) + " is " + std::to_string(dst[i]) +
                     ", outside [0, " + std::to_string(num_classes) + ")");
    }
  }
}

void read_encoded_index(const h5::Hid& file, const DatasetHeader& header, const std::string& path,
                        uint64_t* offsets) {
  h5::quiet();
  const int64_t n = header.info.num_samples;
  h5::Hid odset = open_dataset(file, kOffsetsName, path);
  h5::check(H5Dread(odset.get(), H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets),
            path + ": cannot read dataset /offsets");
  if (offsets[0] != 0)
    fail(path, "dataset /offsets: entry 0 is " + std::to_string(offsets[0]) + ", expected 0");
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t a = offsets[i], b = offsets[i + 1];
    if (b <= a || b - a > static_cast<uint64_t>(kMaxEncodedSampleBytes)) {
      fail(path, "dataset /offsets: sample " + std::to_string(i) + " spans [" + std::to_string(a) +
                     ", " + std::to_string(b) + "), expected 1 to " +
                     std::to_string(kMaxEncodedSampleBytes) + " bytes");
    }
  }
  if (offsets[n] != header.encoded_bytes) {
    fail(path, "dataset /offsets ends at " + std::to_string(offsets[n]) + " but /encoded has " +
                   std::to_string(header.encoded_bytes) + " bytes");
  }
  std::vector<int32_t> shapes(static_cast<size_t>(n) * 2);
  h5::Hid sdset = open_dataset(file, kShapesName, path);
  h5::check(H5Dread(sdset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, shapes.data()),
            path + ": cannot read dataset /shapes");
  int64_t max_h = 0, max_w = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t h = shapes[static_cast<size_t>(2 * i)],
                  w = shapes[static_cast<size_t>(2 * i + 1)];
    if (h < 1 || h > kMaxSide || w < 1 || w > kMaxSide) {
      fail(path, "dataset /shapes: sample " + std::to_string(i) + " is " + std::to_string(h) + "x" +
                     std::to_string(w) + ", outside [1, " + std::to_string(kMaxSide) + "]");
    }
    max_h = std::max(max_h, h);
    max_w = std::max(max_w, w);
  }
  if (max_h != header.info.height || max_w != header.info.width) {
    fail(path, attr_text(kImageShapeAttr) + " says the largest image is " +
                   std::to_string(header.info.height) + "x" + std::to_string(header.info.width) +
                   " but /shapes holds " + std::to_string(max_h) + "x" + std::to_string(max_w));
  }
}

std::string read_string_attribute(const std::string& path, const char* name) {
  h5::quiet();
  h5::Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.valid()) return "";
  H5Pset_file_locking(fapl.get(), false, true);
  h5::Hid file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid() || H5Aexists(file.get(), name) <= 0) {
    h5::error_text();
    return "";
  }
  try {
    const auto values = read_strings(file.get(), name, path, 1);
    return values.empty() ? "" : values.front();
  } catch (const rt::DatasetFormatError&) {
    return "";
  }
}

}  // namespace hpctrain::data
