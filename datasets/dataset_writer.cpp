#include "dataset_writer.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.hpp"
#include "data/h5.hpp"

namespace hpctrain::datasets {

// The layout's names, limits and summary (data/format.hpp) and the HDF5 helpers (data/h5.hpp).
using namespace data;

int64_t default_chunk_images(int64_t sample_bytes) {
  return std::max<int64_t>(1, kTargetChunkBytes / std::max<int64_t>(1, sample_bytes));
}

namespace {

void write_attr(hid_t obj, const char* name, hid_t type, const std::vector<hsize_t>& dims,
                const void* values, const std::string& where) {
  h5::Hid space =
      dims.empty()
          ? h5::check(H5Screate(H5S_SCALAR), H5Sclose, where)
          : h5::check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                      H5Sclose, where);
  h5::Hid attr = h5::check(H5Acreate2(obj, name, type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                           H5Aclose, where + ": cannot create attribute '" + name + "'");
  h5::check(H5Awrite(attr.get(), type, values), where + ": cannot write attribute '" + name + "'");
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

}  // namespace hpctrain::datasets
