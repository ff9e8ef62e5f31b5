// The layout's reading side (read_header, read_labels) called directly: it describes what
// DatasetWriter wrote, and the attribute rules that source_test's BadInput cases do not reach each
// reject a file with one exact message, the same one ImageSource::open gives for that file.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/format.hpp"
#include "data/h5.hpp"
#include "data/source.hpp"
#include "dataset_writer.hpp"
#include "support/error_text.hpp"
#include "test_util.hpp"

namespace hpctrain::data {
namespace {

using testing::RawFile;
using testing::TempDir;

h5::Hid open_read_only(const std::string& path) {
  h5::quiet();
  return h5::check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, path);
}

DatasetHeader header_of(const std::string& path) {
  return read_header(open_read_only(path), path, std::filesystem::file_size(path));
}

// Replaces root attribute `name` with `count` elements of `type` (a scalar when count is 0).
void set_attr(hid_t file, const char* name, hid_t type, hsize_t count, const void* data) {
  H5Adelete(file, name);
  const hid_t space = count == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &count, nullptr);
  const hid_t attr = H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(attr, 0) << name;
  EXPECT_GE(H5Awrite(attr, type, data), 0) << name;
  H5Aclose(attr);
  H5Sclose(space);
}

void set_doubles(hid_t file, const char* name, const std::vector<double>& values) {
  set_attr(file, name, H5T_NATIVE_DOUBLE, values.size(), values.data());
}

// Fixed-length strings (the writer writes variable-length ones; readers accept both).
void set_fixed_strings(hid_t file, const char* name, const std::vector<std::string>& values,
                       bool scalar) {
  const size_t width = 16;
  std::vector<char> buf(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) values[i].copy(buf.data() + i * width, width);
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, width);
  set_attr(file, name, type, scalar ? 0 : values.size(), buf.data());
  H5Tclose(type);
}

// The rt::DatasetFormatError message (without the rank/file:line prefix) `what` throws, or "".
std::string format_error(const std::function<void()>& what) {
  return hpctrain::test::bare_message_of<rt::DatasetFormatError>(what);
}

TEST(Format, ReadHeaderDescribesWhatTheWriterWrote) {
  TempDir dir;
  const auto path = dir.file("a.h5");
  const int64_t n = 21, h = 5, w = 4, c = 3, sb = h * w * c;
  std::vector<uint8_t> images(static_cast<size_t>(n * sb));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < sb; ++p) images[i * sb + p] = testing::pixel_value(i, p);
    labels[i] = testing::label_of(i, 3);
  }
  datasets::DatasetWriter writer(path, n, h, w, c, {"cat", "dog", "émeu"}, {/*chunk_images=*/8});
  writer.write(0, n, images.data(), labels.data());
  const DatasetInfo written = writer.finish();

  const h5::Hid file = open_read_only(path);
  const DatasetHeader header = read_header(file, path, std::filesystem::file_size(path));
  const DatasetInfo& read = header.info;
  EXPECT_EQ(read.num_samples, written.num_samples);
  EXPECT_EQ(read.height, written.height);
  EXPECT_EQ(read.width, written.width);
  EXPECT_EQ(read.channels, written.channels);
  EXPECT_EQ(read.num_classes, 3);
  EXPECT_EQ(read.class_names, written.class_names);
  EXPECT_EQ(read.mean, written.mean);  // float64 both ways: bit-identical
  EXPECT_EQ(read.std, written.std);
  EXPECT_EQ(read.chunk_images, 8);
  EXPECT_EQ(header.storage, DatasetHeader::Storage::kChunked);
  EXPECT_TRUE(header.whole_image_chunks);
  EXPECT_FALSE(header.filtered);
  EXPECT_EQ(header.pixel_bytes(), static_cast<uint64_t>(n * sb));

  std::vector<int64_t> got(static_cast<size_t>(n), -1);
  read_labels(file, header, path, got.data());
  EXPECT_EQ(got, labels);
}

TEST(Format, LabelValuesAreCheckedByReadLabelsNotReadHeader) {
  TempDir dir;
  const auto path = dir.file("a.h5");
  testing::make_dataset(path, 40, 6, 6, 3, 10, 8);
  RawFile(path).write_label(17, 10);
  const h5::Hid file = open_read_only(path);
  const DatasetHeader header = read_header(file, path, std::filesystem::file_size(path));
  std::vector<int64_t> labels(40);
  EXPECT_EQ(format_error([&] { read_labels(file, header, path, labels.data()); }),
            path + ": dataset /labels: entry 17 is 10, outside [0, 10)");
}

struct Damage {
  const char* name;
  std::function<void(RawFile&)> apply;
  std::string expected;  // after "<path>: "
};

// One damage per rule of the format, with the message it must give.
std::vector<Damage> damage_per_rule() {
  const double nan = std::nan("");
  return {
      // Identity is checked first: the missing /labels is not what is reported.
      {"version before datasets",
       [](RawFile& f) {
         f.set_int_attr(kFormatVersionAttr, 3);
         f.remove(kLabelsName);
       },
       "format version 3 is not supported (this build reads versions 1 and 2)"},
      {"a version-2 label on a pixel file",
       [](RawFile& f) { f.set_int_attr(kFormatVersionAttr, 2); },
       "dataset /encoded is missing (format version 2)"},
      {"other format (fixed-length string)",
       [](RawFile& f) { set_fixed_strings(f.id(), kFormatAttr, {"other"}, /*scalar=*/true); },
       "attribute 'format' is 'other', expected 'hpctrain-images'"},
      {"labels not integers",
       [](RawFile& f) {
         f.remove(kLabelsName);
         f.create(kLabelsName, H5T_IEEE_F32LE, {40});
       },
       "dataset /labels must hold integers"},
      {"labels rank 2",
       [](RawFile& f) {
         f.remove(kLabelsName);
         f.create(kLabelsName, H5T_STD_I64LE, {40, 1});
       },
       "dataset /labels has rank 2, expected 1 [N]"},
      {"image_shape disagrees",
       [](RawFile& f) {
         set_doubles(f.id(), kImageShapeAttr, {6, 6, 1});
       },
       "attribute 'image_shape' does not match /images shape [40, 6, 6, 3]"},
      {"num_classes zero", [](RawFile& f) { f.set_int_attr(kNumClassesAttr, 0); },
       "attribute 'num_classes' is 0, expected 1..1048576"},
      {"num_classes not an integer",
       [](RawFile& f) { set_doubles(f.id(), kNumClassesAttr, {10.0}); },
       "attribute 'num_classes' is not an integer"},
      {"class_names short (fixed-length strings)",
       [](RawFile& f) {
         set_fixed_strings(f.id(), kClassNamesAttr, {"a", "b", "c", "d", "e", "f", "g", "h", "i"},
                           /*scalar=*/false);
       },
       "attribute 'class_names' has 9 names for 10 classes"},
      {"mean per channel",
       [](RawFile& f) {
         set_doubles(f.id(), kMeanAttr, {0.5, 0.5});
       },
       "attributes 'mean' and 'std' need one value per channel (3)"},
      {"std beyond the channel limit",
       [](RawFile& f) {
         set_doubles(f.id(), kStdAttr, {0.2, 0.2, 0.2, 0.2, 0.2});
       },
       "attribute 'std' has 5 elements (at most 4 expected)"},
      {"std zero",
       [](RawFile& f) {
         set_doubles(f.id(), kStdAttr, {0.2, 0.0, 0.2});
       },
       "attribute 'std' must be positive and 'mean' finite"},
      {"mean NaN",
       [nan](RawFile& f) {
         set_doubles(f.id(), kMeanAttr, {0.5, nan, 0.5});
       },
       "attribute 'std' must be positive and 'mean' finite"},
  };
}

TEST(Format, EachRuleRejectsWithOneMessageForValidatorAndLoader) {
  TempDir dir;
  const auto good = dir.file("good.h5");
  testing::make_dataset(good, 40, 6, 6, 3, 10, 8);
  ASSERT_EQ(format_error([&] { header_of(good); }), "");
  for (const Damage& d : damage_per_rule()) {
    const auto path = dir.file("bad.h5");
    std::filesystem::copy_file(good, path, std::filesystem::copy_options::overwrite_existing);
    {
      RawFile raw(path);
      d.apply(raw);
    }
    const std::string validator = format_error([&] { header_of(path); });
    EXPECT_EQ(validator, path + ": " + d.expected) << d.name;
    EXPECT_EQ(format_error([&] { ImageSource::open({path}); }), validator) << d.name;
  }
}

}  // namespace
}  // namespace hpctrain::data
