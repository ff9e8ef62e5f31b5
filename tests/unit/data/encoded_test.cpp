// Format version 2 (encoded JPEG samples): EncodedDatasetWriter -> ImageSource -> Loader. Bytes
// come back exactly (pread and mapped paths, coalesced or not, across files); loader batches are
// the transform of each sample whatever the thread count; damaged indexes, mixed versions and a
// sample that does not decode are refused naming the file and sample, or skipped when asked;
// /shapes that disagree with image_shape, another encoding and labels not one per sample are
// refused at open naming the file and the dataset or attribute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "data/augment.hpp"
#include "data/format.hpp"
#include "data/loader.hpp"
#include "data/rng.hpp"
#include "data/source.hpp"
#include "dataset_writer.hpp"
#include "jpeg_codec.hpp"
#include "support/error_text.hpp"
#include "test_util.hpp"

namespace hpctrain::data {
namespace {

using testing::RawFile;
using testing::TempDir;

// EXPECT that `expr` throws E whose message contains `needle`.
#define EXPECT_THAT_MESSAGE(expr, E, needle)                                           \
  do {                                                                                 \
    const std::string message_ = hpctrain::test::message_of<E>([&] { (void)(expr); }); \
    EXPECT_NE(message_.find(needle), std::string::npos) << message_;                   \
  } while (0)

// Sample i: a textured RGB image whose size and content depend on i.
std::vector<uint8_t> jpeg_of(int64_t i, int64_t* h_out = nullptr, int64_t* w_out = nullptr) {
  const int64_t h = 30 + (i * 13) % 50, w = 40 + (i * 29) % 60;
  std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
  SplitMix64 rng(static_cast<uint64_t>(i) + 7);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < 3; ++k) {
        const double v = 128 +
                         80 * std::sin(0.1 * static_cast<double>(x + i) + k) *
                             std::cos(0.07 * static_cast<double>(y) - k) +
                         static_cast<double>(rng.below(20));
        px[static_cast<size_t>((y * w + x) * 3 + k)] =
            static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  if (h_out != nullptr) *h_out = h;
  if (w_out != nullptr) *w_out = w;
  return datasets::encode_jpeg_rgb(px.data(), h, w, 90);
}

std::vector<std::string> classes(int n) {
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k) out.push_back("c" + std::to_string(k));
  return out;
}

// Samples [first, first + n) into one file; `broken` (a global index) gets a truncated JPEG.
void write_encoded(const std::string& path, int64_t first, int64_t n, int64_t broken = -1) {
  datasets::EncodedDatasetWriter writer(path, classes(5), 3, "encoded_test");
  datasets::PixelStats stats;
  for (int64_t i = first; i < first + n; ++i) {
    int64_t h = 0, w = 0;
    std::vector<uint8_t> bytes = jpeg_of(i, &h, &w);
    if (i == broken) bytes.resize(bytes.size() / 3);
    writer.add(bytes.data(), bytes.size(), h, w, i % 5);
    const uint8_t grey[3] = {100, 120, 140};
    stats.add(grey, 1, 3);
  }
  writer.add_stats(stats);
  writer.finish();
}

TEST(Encoded, BytesComeBackExactlyOnEveryReadPath) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 7);
  write_encoded(dir.file("b.h5"), 7, 6);
  const std::vector<int64_t> samples = {12, 0, 5, 5, 7, 3, 11, 6, 1, 0};
  for (const bool map : {true, false}) {
    for (const bool coalesce : {true, false}) {
      SourceOptions o;
      o.cache_bytes = map ? o.cache_bytes : 0;
      o.coalesce_reads = coalesce;
      const auto src = ImageSource::open({dir.file("*.h5")}, o);
      ASSERT_TRUE(src->encoded());
      EXPECT_EQ(src->size(), 13);
      EXPECT_EQ(src->info().channels, 3);
      EXPECT_EQ(src->info().num_classes, 5);
      int64_t max_h = 0, max_w = 0;
      for (int64_t i = 0; i < 13; ++i) {
        int64_t h = 0, w = 0;
        jpeg_of(i, &h, &w);
        max_h = std::max(max_h, h);
        max_w = std::max(max_w, w);
        EXPECT_EQ(src->labels()[static_cast<size_t>(i)], i % 5);
      }
      EXPECT_EQ(src->info().height, max_h);
      EXPECT_EQ(src->info().width, max_w);
      std::vector<uint8_t> bytes;
      std::vector<size_t> starts;
      src->read_encoded(samples.data(), static_cast<int64_t>(samples.size()), bytes, starts);
      for (size_t k = 0; k < samples.size(); ++k) {
        const auto want = jpeg_of(samples[k]);
        ASSERT_EQ(starts[k + 1] - starts[k], want.size()) << "sample " << samples[k];
        EXPECT_EQ(0, std::memcmp(bytes.data() + starts[k], want.data(), want.size()))
            << "sample " << samples[k] << " map " << map << " coalesce " << coalesce;
      }
      EXPECT_EQ(src->files().front().cached, map);
      EXPECT_THROW(src->read(0, 1, bytes.data()), rt::DataError);
    }
  }
}

LoaderConfig jpeg_config(bool train, int64_t workers) {
  LoaderConfig c;
  c.batch_size = 4;
  c.workers = workers;
  c.prefetch_batches = 2;
  c.seed = 11;
  c.shuffle = train;
  c.tail = TailPolicy::kPad;
  c.transform.train = train;
  c.transform.augment = Augment::kRandomResizedCrop;
  c.transform.image_size = 24;
  return c;
}

TEST(Encoded, LoaderBatchesAreEachSamplesTransformWhateverTheThreads) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 10);
  const auto src = ImageSource::open({dir.file("a.h5")});
  for (const bool train : {true, false}) {
    std::vector<std::vector<uint8_t>> runs;
    for (const int64_t workers : {0, 2}) {
      Loader loader(src, jpeg_config(train, workers));
      const Transform& t = loader.transform();
      loader.start_epoch(1);
      std::vector<uint8_t> all;
      while (auto b = loader.next()) {
        const auto* data = static_cast<const uint8_t*>(b->data());
        const size_t sb = t.sample_output_bytes();
        for (int64_t i = 0; i < b->size; ++i) {
          const int64_t s = b->samples[static_cast<size_t>(i)];
          const auto jpeg = jpeg_of(s);
          std::vector<uint8_t> want(sb);
          t.apply_jpeg(jpeg.data(), jpeg.size(), 11, 1, s, want.data());
          EXPECT_EQ(0, std::memcmp(data + static_cast<size_t>(i) * sb, want.data(), sb))
              << "sample " << s;
          EXPECT_EQ(b->labels[static_cast<size_t>(i)], s % 5);
        }
        all.insert(all.end(), data, data + b->bytes());
      }
      runs.push_back(all);
    }
    EXPECT_EQ(runs[0], runs[1]) << "train " << train;
  }
}

TEST(Encoded, ImageSizeIsRequiredAndCropFlipRefused) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 3);
  const auto src = ImageSource::open({dir.file("a.h5")});
  auto c = jpeg_config(true, 0);
  c.transform.image_size = 0;
  EXPECT_THAT_MESSAGE(Loader(src, c), rt::DataError, "set [data] image_size");
  c = jpeg_config(true, 0);
  c.transform.augment = Augment::kCropFlip;
  EXPECT_THAT_MESSAGE(Loader(src, c), rt::DataError, "random_resized_crop");
}

TEST(Encoded, ACorruptSampleStopsTheLoaderNamingItOrIsSkippedWhenAsked) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 8, /*broken=*/5);
  const auto src = ImageSource::open({dir.file("a.h5")});
  {
    Loader loader(src, jpeg_config(false, 2));
    loader.start_epoch(0);
    try {
      while (loader.next()) {
      }
      FAIL() << "a truncated JPEG went through";
    } catch (const rt::DataError& e) {
      EXPECT_NE(std::string(e.what()).find(dir.file("a.h5") + ": sample 5"), std::string::npos)
          << e.what();
    }
  }
  auto c = jpeg_config(false, 2);
  c.skip_corrupt = true;
  std::vector<std::string> heard;
  std::mutex mu;
  c.on_corrupt = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    heard.push_back(what);
  };
  Loader loader(src, c);
  loader.start_epoch(0);
  int64_t seen = 0;
  while (auto b = loader.next()) {
    for (int64_t i = 0; i < b->size; ++i) {
      if (b->samples[static_cast<size_t>(i)] != 5) continue;
      // Replaced by the first sample of its batch that decoded: image and label.
      const size_t sb = loader.transform().sample_output_bytes();
      const auto* data = static_cast<const uint8_t*>(b->data());
      EXPECT_EQ(0, std::memcmp(data + static_cast<size_t>(i) * sb, data, sb));
      EXPECT_EQ(b->labels[static_cast<size_t>(i)], b->labels[0]);
    }
    seen += b->size;
  }
  EXPECT_EQ(seen, 8);
  EXPECT_EQ(loader.stats().corrupt_samples, 1);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_NE(heard[0].find("sample 5"), std::string::npos) << heard[0];
}

TEST(Encoded, PixelAndEncodedFilesDoNotMix) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 3);
  testing::make_dataset(dir.file("b.h5"), 4, 8, 8, 3, 5);
  EXPECT_THAT_MESSAGE(ImageSource::open({dir.file("a.h5"), dir.file("b.h5")}),
                      rt::DatasetFormatError, "files of one dataset must match");
}

// Overwrites entry `index` of /offsets.
void poke_offset(const std::string& path, int64_t index, uint64_t value) {
  RawFile(path).write_element(kOffsetsName, H5T_NATIVE_UINT64, index, &value);
}

TEST(Encoded, ADamagedIndexIsRefusedNamingTheSample) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 4);
  poke_offset(dir.file("a.h5"), 2, 3);  // sample 1 now ends before it starts
  EXPECT_THAT_MESSAGE(ImageSource::open({dir.file("a.h5")}), rt::DatasetFormatError,
                      "dataset /offsets: sample 1 spans");
  write_encoded(dir.file("b.h5"), 0, 4);
  poke_offset(dir.file("b.h5"), 4, uint64_t{1} << 40);
  EXPECT_THAT_MESSAGE(ImageSource::open({dir.file("b.h5")}), rt::DatasetFormatError,
                      "dataset /offsets: sample 3 spans");
  write_encoded(dir.file("c.h5"), 0, 4);
  RawFile(dir.file("c.h5")).set_int_attr(kFormatVersionAttr, 3);
  EXPECT_THAT_MESSAGE(ImageSource::open({dir.file("c.h5")}), rt::DatasetFormatError,
                      "format version 3 is not supported");
}

// Overwrites sample `index`'s entry of /shapes with height x width.
void poke_shape(const std::string& path, int64_t index, int32_t height, int32_t width) {
  RawFile file(path);
  hid_t ds = H5Dopen2(file.id(), kShapesName, H5P_DEFAULT);
  hid_t fspace = H5Dget_space(ds);
  const hsize_t start[2] = {static_cast<hsize_t>(index), 0}, count[2] = {1, 2};
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mspace = H5Screate_simple(2, count, nullptr);
  const int32_t value[2] = {height, width};
  H5Dwrite(ds, H5T_NATIVE_INT32, mspace, fspace, H5P_DEFAULT, value);
  H5Sclose(mspace);
  H5Sclose(fspace);
  H5Dclose(ds);
}

// Replaces the root attribute image_shape.
void set_image_shape(const std::string& path, int64_t height, int64_t width, int64_t channels) {
  RawFile file(path);
  H5Adelete(file.id(), kImageShapeAttr);
  const hsize_t dims[1] = {3};
  const int64_t value[3] = {height, width, channels};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  hid_t attr =
      H5Acreate2(file.id(), kImageShapeAttr, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, H5T_NATIVE_INT64, value);
  H5Aclose(attr);
  H5Sclose(space);
}

// Replaces the root attribute encoding with the scalar UTF-8 string `value`, as the writer does.
void set_encoding(const std::string& path, const char* value) {
  RawFile file(path);
  H5Adelete(file.id(), kEncodingAttr);
  hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  hid_t space = H5Screate(H5S_SCALAR);
  hid_t attr = H5Acreate2(file.id(), kEncodingAttr, type, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(attr, type, &value);
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

// The largest height and width among samples [0, n), as write_encoded() records them.
std::pair<int64_t, int64_t> largest_of(int64_t n) {
  int64_t max_h = 0, max_w = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t h = 0, w = 0;
    jpeg_of(i, &h, &w);
    max_h = std::max(max_h, h);
    max_w = std::max(max_w, w);
  }
  return {max_h, max_w};
}

// EXPECT that opening `path` is refused with "<path>: <what>..." (a macro: failures name the
// caller's line).
#define EXPECT_REFUSED(path, what) \
  EXPECT_THAT_MESSAGE(ImageSource::open({path}), rt::DatasetFormatError, (path) + ": " + (what))

// The index checks at open beyond /offsets (docs/dataset-format.md): /shapes within the limits
// with the largest equal to image_shape, which the decoder's buffers are sized by.
TEST(Encoded, ShapesDisagreeingWithImageShapeAreRefused) {
  TempDir dir;
  const auto [h, w] = largest_of(4);
  const std::string said = "attribute 'image_shape' says the largest image is " +
                           std::to_string(h) + "x" + std::to_string(w) + " but /shapes holds ";
  write_encoded(dir.file("larger.h5"), 0, 4);
  poke_shape(dir.file("larger.h5"), 1, static_cast<int32_t>(h + 100), 50);
  EXPECT_REFUSED(dir.file("larger.h5"), said + std::to_string(h + 100) + "x" + std::to_string(w));

  write_encoded(dir.file("smaller.h5"), 0, 4);
  set_image_shape(dir.file("smaller.h5"), h, w + 1, 3);
  EXPECT_REFUSED(dir.file("smaller.h5"), "attribute 'image_shape' says the largest image is " +
                                             std::to_string(h) + "x" + std::to_string(w + 1) +
                                             " but /shapes holds " + std::to_string(h) + "x" +
                                             std::to_string(w));
}

TEST(Encoded, AShapeOutsideTheLimitsIsRefusedNamingTheSample) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 4);
  poke_shape(dir.file("a.h5"), 0, 0, 40);  // sample 0 is the largest in neither side
  EXPECT_REFUSED(dir.file("a.h5"), "dataset /shapes: sample 0 is 0x40, outside [1, 16384]");
}

TEST(Encoded, AnotherEncodingIsRefused) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 4);
  set_encoding(dir.file("a.h5"), "png");
  EXPECT_REFUSED(dir.file("a.h5"), "attribute 'encoding' is 'png', expected 'jpeg'");
}

TEST(Encoded, LabelsNotOnePerSampleAreRefused) {
  TempDir dir;
  write_encoded(dir.file("a.h5"), 0, 4);
  {
    RawFile file(dir.file("a.h5"));
    file.remove(kLabelsName);
    file.create(kLabelsName, H5T_STD_I64LE, {5});
  }
  EXPECT_REFUSED(dir.file("a.h5"), "dataset /labels has 5 entries");
}

TEST(Encoded, TheWriterRefusesWhatTheFormatCannotHold) {
  TempDir dir;
  datasets::EncodedDatasetWriter writer(dir.file("a.h5"), classes(2), 3, "test");
  const uint8_t byte = 0;
  EXPECT_THROW(writer.add(&byte, 0, 10, 10, 0), rt::DataError);
  EXPECT_THROW(writer.add(&byte, 1, 0, 10, 0), rt::DataError);
  EXPECT_THROW(writer.add(&byte, 1, 10, 10, 2), rt::DataError);
  EXPECT_THROW(writer.finish(), rt::DataError);  // no samples
}

}  // namespace
}  // namespace hpctrain::data
