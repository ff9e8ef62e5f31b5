#include "data/format.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>

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

}  // namespace

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

  // Version-1.10 object headers carry checksums, so a flipped bit in the metadata is reported
  // instead of being read as a different shape.
  h5::Hid fapl = h5::check(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, path);
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V110, H5F_LIBVER_V110), path);
  h5::check(H5Pset_file_locking(fapl.get(), false, true), path);
  s.file = h5::check(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose,
                     path + ": cannot create file");

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
  const double count = static_cast<double>(s.n * s.h * s.w);
  for (int64_t ch = 0; ch < s.c; ++ch) {
    const double mean = static_cast<double>(s.sum[ch]) / count;
    const double var = std::max(0.0, static_cast<double>(s.sum_sq[ch]) / count - mean * mean);
    info.mean.push_back(mean / 255.0);
    // A constant channel would divide by zero when normalising; 1.0 leaves it centred only.
    const double sd = std::sqrt(var) / 255.0;
    info.std.push_back(sd > 0 ? sd : 1.0);
  }
  const hid_t root = s.file.get();
  const std::string& where = s.path;
  write_string_attr(root, "format", {kFormatName}, /*scalar=*/true, where);
  write_attr(root, "format_version", H5T_NATIVE_INT64, {}, &kFormatVersion, where);
  write_attr(root, "num_classes", H5T_NATIVE_INT64, {}, &info.num_classes, where);
  write_string_attr(root, "class_names", s.class_names, /*scalar=*/false, where);
  const int64_t shape[3] = {s.h, s.w, s.c};
  write_attr(root, "image_shape", H5T_NATIVE_INT64, {3}, shape, where);
  write_attr(root, "mean", H5T_NATIVE_DOUBLE, {info.mean.size()}, info.mean.data(), where);
  write_attr(root, "std", H5T_NATIVE_DOUBLE, {info.std.size()}, info.std.data(), where);
  s.images.reset();
  s.labels.reset();
  h5::check(H5Fflush(root, H5F_SCOPE_GLOBAL), where + ": cannot flush");
  s.file.reset();
  s.finished = true;
  return info;
}

}  // namespace hpctrain::data
