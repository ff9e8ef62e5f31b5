// Converters: IDX (real Fashion-MNIST and synthetic), CIFAR-10 and image folders round-trip to
// the original pixels and labels; malformed inputs are reported with the file name. The JPEG
// folder converter's workers write what one thread writes.
#include <gtest/gtest.h>
#include <stb_image_write.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/error.hpp"
#include "convert.hpp"
#include "data/source.hpp"
#include "jpeg_codec.hpp"
#include "test_util.hpp"

namespace hpctrain::datasets {
namespace {

using data::ImageSource;
using data::testing::TempDir;

std::vector<uint8_t> gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::vector<uint8_t> out;
  if (f == nullptr) return out;
  uint8_t buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

std::vector<uint8_t> read_all(const ImageSource& src) {
  std::vector<uint8_t> out(static_cast<size_t>(src.size() * src.info().sample_bytes()));
  src.read(0, src.size(), out.data());
  return out;
}

TEST(ConvertIdx, FashionMnistRoundTrip) {
  const std::string dir = HPCTRAIN_FASHION_MNIST_DIR;
  const std::string images = dir + "/t10k-images-idx3-ubyte.gz";
  const std::string labels = dir + "/t10k-labels-idx1-ubyte.gz";
  ASSERT_TRUE(std::filesystem::exists(images))
      << images << " missing: install the Debian package dataset-fashion-mnist";
  TempDir tmp;
  ConvertOptions opts;
  opts.class_names = fashion_mnist_classes();
  const auto summary = convert_idx(images, labels, tmp.file("t10k.h5"), opts);
  EXPECT_EQ(summary.info.num_samples, 10000);
  EXPECT_EQ(summary.class_counts, std::vector<int64_t>(10, 1000));

  const auto src = ImageSource::open({tmp.file("t10k.h5")});
  EXPECT_EQ(src->info().height, 28);
  EXPECT_EQ(src->info().channels, 1);
  EXPECT_EQ(src->info().class_names[9], "Ankle boot");
  EXPECT_NEAR(src->info().mean[0], 0.2868, 1e-3);  // the published Fashion-MNIST test mean
  const auto raw_images = gunzip(images);
  const auto raw_labels = gunzip(labels);
  ASSERT_EQ(raw_images.size(), 16u + 10000 * 784);
  ASSERT_EQ(raw_labels.size(), 8u + 10000);
  const auto pixels = read_all(*src);
  EXPECT_TRUE(std::equal(pixels.begin(), pixels.end(), raw_images.begin() + 16));
  for (int64_t i = 0; i < 10000; ++i) ASSERT_EQ(src->labels()[i], raw_labels[8 + i]);
}

void write_idx(const std::string& path, std::vector<uint8_t> header_dims_be,
               const std::vector<uint8_t>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header_dims_be.data()),
          static_cast<std::streamsize>(header_dims_be.size()));
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

TEST(ConvertIdx, PlainFilesAndBadInputs) {
  TempDir tmp;
  std::vector<uint8_t> pixels(5 * 3 * 4), labels = {0, 1, 2, 1, 0};
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 3);
  write_idx(tmp.file("img"), {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 4}, pixels);
  write_idx(tmp.file("lab"), {0, 0, 8, 1, 0, 0, 0, 5}, labels);
  convert_idx(tmp.file("img"), tmp.file("lab"), tmp.file("out.h5"), {});
  const auto src = ImageSource::open({tmp.file("out.h5")});
  EXPECT_EQ(read_all(*src), pixels);
  EXPECT_EQ(src->info().num_classes, 3);
  EXPECT_EQ(src->labels(), (std::vector<int64_t>{0, 1, 2, 1, 0}));

  auto expect_error = [&](const std::string& img, const std::string& lab,
                          const std::string& fragment) {
    try {
      convert_idx(img, lab, tmp.file("bad.h5"), {});
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const rt::DataError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  // Truncated pixels.
  write_idx(tmp.file("short"), {0, 0, 8, 3, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 4},
            std::vector<uint8_t>(pixels.begin(), pixels.begin() + 30));
  expect_error(tmp.file("short"), tmp.file("lab"), "truncated");
  // Count mismatch, wrong type, wrong magic, missing file.
  write_idx(tmp.file("lab4"), {0, 0, 8, 1, 0, 0, 0, 4}, {0, 1, 2, 1});
  expect_error(tmp.file("img"), tmp.file("lab4"), "4 labels");
  write_idx(tmp.file("float"), {0, 0, 0x0d, 3, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 4}, pixels);
  expect_error(tmp.file("float"), tmp.file("lab"), "unsigned byte");
  write_idx(tmp.file("magic"), {1, 2, 8, 3, 0, 0, 0, 5, 0, 0, 0, 3, 0, 0, 0, 4}, pixels);
  expect_error(tmp.file("magic"), tmp.file("lab"), "magic");
  expect_error(tmp.file("nope"), tmp.file("lab"), "nope");
  // Too few class names for the labels.
  ConvertOptions two;
  two.class_names = {"a", "b"};
  EXPECT_THROW(convert_idx(tmp.file("img"), tmp.file("lab"), tmp.file("x.h5"), two), rt::DataError);
}

TEST(ConvertCifar10, RoundTripInterleavesPlanes) {
  TempDir tmp;
  const int64_t records = 7;
  std::vector<uint8_t> file;
  for (int64_t r = 0; r < records; ++r) {
    file.push_back(static_cast<uint8_t>(r % 10));
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t p = 0; p < 1024; ++p) file.push_back(static_cast<uint8_t>(r * 3 + c + p));
    }
  }
  std::ofstream(tmp.file("data_batch_1.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  std::ofstream(tmp.file("batches.meta.txt")) << "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n";
  convert_cifar10({tmp.file("data_batch_1.bin"), tmp.file("data_batch_1.bin")}, tmp.file("c.h5"),
                  {});
  const auto src = ImageSource::open({tmp.file("c.h5")});
  ASSERT_EQ(src->size(), 14);
  EXPECT_EQ(src->info().class_names[2], "c");
  const auto px = read_all(*src);
  for (int64_t i = 0; i < 14; ++i) {
    const int64_t r = i % records;
    EXPECT_EQ(src->labels()[i], r % 10);
    for (int64_t p = 0; p < 1024; p += 97) {
      for (int64_t c = 0; c < 3; ++c) {
        ASSERT_EQ(px[i * 3072 + p * 3 + c], static_cast<uint8_t>(r * 3 + c + p));
      }
    }
  }
  // A truncated batch and a label outside [0, 10).
  std::ofstream(tmp.file("short.bin"), std::ios::binary).write("x", 1);
  EXPECT_THROW(convert_cifar10({tmp.file("short.bin")}, tmp.file("d.h5"), {}), rt::DataError);
  file[0] = 12;
  std::ofstream(tmp.file("badlabel.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  try {
    convert_cifar10({tmp.file("badlabel.bin")}, tmp.file("d.h5"), {});
    ADD_FAILURE() << "no error";
  } catch (const rt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("badlabel.bin"), std::string::npos);
  }
}

TEST(ConvertImageFolder, DecodesResizesAndLabelsByDirectory) {
  TempDir tmp;
  const auto root = tmp.file("tree");
  std::filesystem::create_directories(root + "/cat");
  std::filesystem::create_directories(root + "/dog");
  // Constant-colour images of different sizes: resizing keeps the colour exactly.
  auto write_png = [](const std::string& path, int w, int h, uint8_t r, uint8_t g, uint8_t b) {
    std::vector<uint8_t> px(static_cast<size_t>(w * h * 3));
    for (size_t i = 0; i < px.size(); i += 3) {
      px[i] = r;
      px[i + 1] = g;
      px[i + 2] = b;
    }
    ASSERT_NE(stbi_write_png(path.c_str(), w, h, 3, px.data(), w * 3), 0);
  };
  write_png(root + "/cat/1.png", 40, 20, 200, 10, 10);
  write_png(root + "/cat/2.png", 16, 16, 10, 200, 10);
  write_png(root + "/dog/a.png", 20, 50, 10, 10, 200);
  std::ofstream(root + "/dog/readme.txt") << "not an image";
  const auto summary = convert_image_folder(root, tmp.file("f.h5"), 8, 3, {});
  EXPECT_EQ(summary.class_counts, (std::vector<int64_t>{2, 1}));
  const auto src = ImageSource::open({tmp.file("f.h5")});
  EXPECT_EQ(src->info().class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(src->labels(), (std::vector<int64_t>{0, 0, 1}));
  const auto px = read_all(*src);
  ASSERT_EQ(px.size(), 3u * 8 * 8 * 3);
  const uint8_t expect[3][3] = {{200, 10, 10}, {10, 200, 10}, {10, 10, 200}};
  for (int i = 0; i < 3; ++i) {
    for (int p = 0; p < 64; ++p) {
      for (int c = 0; c < 3; ++c) ASSERT_NEAR(px[(i * 64 + p) * 3 + c], expect[i][c], 1);
    }
  }
  // A corrupt image is named.
  std::ofstream(root + "/dog/broken.jpg") << "garbage";
  try {
    convert_image_folder(root, tmp.file("g.h5"), 8, 3, {});
    ADD_FAILURE() << "no error";
  } catch (const rt::DataError& e) {
    EXPECT_NE(std::string(e.what()).find("broken.jpg"), std::string::npos) << e.what();
  }
  EXPECT_THROW(convert_image_folder(tmp.file("none"), tmp.file("h.h5"), 8, 3, {}), rt::DataError);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Several workers convert a shard at once (images claimed one by one, progress printed
// meanwhile): the files are byte for byte those of one thread. Also the ThreadSanitizer pass's
// test of the workers (scripts/test.sh).
TEST(ConvertJpegFolder, WorkersWriteWhatOneThreadWrites) {
  TempDir tmp;
  const auto root = tmp.file("tree");
  for (const char* cls : {"a", "b"}) std::filesystem::create_directories(root + "/" + cls);
  auto image = [](int64_t h, int64_t w, int seed) {
    std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
    for (size_t i = 0; i < px.size(); ++i)
      px[i] = static_cast<uint8_t>((i * 13 + seed * 71) & 0xff);
    return px;
  };
  for (int i = 0; i < 24; ++i) {
    const std::string stem = root + "/" + (i % 2 ? "a/" : "b/") + std::to_string(i);
    // Kept as stored (within max_side), re-encoded (larger), re-encoded (PNG).
    const int64_t h = i % 3 == 1 ? 80 : 40, w = i % 3 == 1 ? 72 : 48;
    const auto px = image(h, w, i);
    if (i % 3 == 2) {
      ASSERT_NE(stbi_write_png((stem + ".png").c_str(), static_cast<int>(w), static_cast<int>(h), 3,
                               px.data(), static_cast<int>(w * 3)),
                0);
    } else {
      const auto jpeg = encode_jpeg_rgb(px.data(), h, w, /*quality=*/85);
      std::ofstream(stem + ".jpg", std::ios::binary)
          .write(reinterpret_cast<const char*>(jpeg.data()),
                 static_cast<std::streamsize>(jpeg.size()));
    }
  }
  std::ofstream(root + "/a/broken.jpg") << "garbage";
  auto convert = [&](const std::string& prefix, int64_t threads) {
    JpegFolderOptions o;
    o.root = root;
    o.output = tmp.file(prefix);
    o.max_side = 64;
    o.threads = threads;
    o.shards = 2;
    std::ostringstream progress;
    o.progress = &progress;
    return convert_jpeg_folder(o);
  };
  const JpegFolderSummary one = convert("one", 1), four = convert("four", 4);
  EXPECT_EQ(four.threads, 4);
  EXPECT_EQ(four.samples, 24);
  EXPECT_EQ(four.stored_as_is, 8);
  EXPECT_EQ(four.reencoded, 16);
  ASSERT_EQ(four.skipped.size(), 1u);
  EXPECT_NE(four.skipped[0].first.find("broken.jpg"), std::string::npos) << four.skipped[0].first;
  ASSERT_EQ(one.outputs.size(), 2u);
  ASSERT_EQ(four.outputs.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    const std::string a = file_bytes(one.outputs[s]), b = file_bytes(four.outputs[s]);
    EXPECT_FALSE(a.empty()) << one.outputs[s];
    EXPECT_TRUE(a == b) << one.outputs[s] << " and " << four.outputs[s] << " differ";
  }
}

TEST(Inspect, ReportsValidAndInvalidFiles) {
  TempDir tmp;
  data::testing::make_dataset(tmp.file("ok.h5"), 30, 4, 4, 3, 5, 8);
  std::ostringstream out;
  inspect(tmp.file("ok.h5"), /*read_all=*/true, /*file_locking=*/false, out);
  EXPECT_NE(out.str().find("OK"), std::string::npos);
  EXPECT_NE(out.str().find("30 x 4x4x3"), std::string::npos) << out.str();
  std::filesystem::resize_file(tmp.file("ok.h5"), 2000);
  EXPECT_THROW(inspect(tmp.file("ok.h5"), true, false, out), rt::DataError);
}

}  // namespace
}  // namespace hpctrain::datasets
