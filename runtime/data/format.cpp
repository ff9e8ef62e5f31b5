#include "data/format.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "data/h5.hpp"

namespace hpctrain::data {

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
