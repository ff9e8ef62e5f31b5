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
  write_string_attr(root, kFormatAttr, {kFormatName}, /*scalar=*/true, where);
  write_attr(root, kFormatVersionAttr, H5T_NATIVE_INT64, {}, &kFormatVersion, where);
  write_attr(root, kNumClassesAttr, H5T_NATIVE_INT64, {}, &info.num_classes, where);
  write_string_attr(root, kClassNamesAttr, s.class_names, /*scalar=*/false, where);
  const int64_t shape[3] = {s.h, s.w, s.c};
  write_attr(root, kImageShapeAttr, H5T_NATIVE_INT64, {3}, shape, where);
  write_attr(root, kMeanAttr, H5T_NATIVE_DOUBLE, {info.mean.size()}, info.mean.data(), where);
  write_attr(root, kStdAttr, H5T_NATIVE_DOUBLE, {info.std.size()}, info.std.data(), where);
  s.images.reset();
  s.labels.reset();
  h5::check(H5Fflush(root, H5F_SCOPE_GLOBAL), where + ": cannot flush");
  s.file.reset();
  s.finished = true;
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

// Identity first: a wrong file should say so, not complain about a missing dataset.
void check_identity(hid_t root, const std::string& path) {
  const auto format = read_strings(root, kFormatAttr, path, 1);
  if (format.size() != 1 || format[0] != kFormatName) {
    fail(path, attr_text(kFormatAttr) + " is '" + (format.empty() ? "" : format[0]) +
                   "', expected '" + kFormatName + "'");
  }
  const int64_t version = read_integer(root, kFormatVersionAttr, path);
  if (version != kFormatVersion) {
    fail(path, "format version " + std::to_string(version) +
                   " is not supported (this build reads version " + std::to_string(kFormatVersion) +
                   ")");
  }
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

}  // namespace

h5::Hid open_dataset(const h5::Hid& file, const char* name, const std::string& path) {
  return h5::check(H5Dopen2(file.get(), name, H5P_DEFAULT), H5Dclose,
                   path + ": cannot open dataset /" + name);
}

DatasetHeader read_header(const h5::Hid& file, const std::string& path, uint64_t file_size) {
  h5::quiet();
  const hid_t root = file.get();
  check_identity(root, path);
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

  // Unfiltered pixels occupy N x H x W x C bytes of the file: a shape larger than the file is
  // a damaged header or a truncated file, and is refused before anything is sized by N.
  h5::Hid fcpl = h5::check(H5Fget_create_plist(root), H5Pclose, path);
  hsize_t userblock = 0;
  H5Pget_userblock(fcpl.get(), &userblock);
  header.userblock = userblock;
  h5::Hid dcpl = h5::check(H5Dget_create_plist(images.get()), H5Pclose, path);
  header.filtered = H5Pget_nfilters(dcpl.get()) != 0;
  if (!header.filtered && header.pixel_bytes() > file_size) {
    fail(path, "dataset /images needs " + std::to_string(header.pixel_bytes()) +
                   " bytes but the file has " + std::to_string(file_size) +
                   " (truncated file or wrong shape)");
  }

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

}  // namespace hpctrain::data
