// data/jpeg.hpp on JPEGs encoded here with libjpeg: the header, a region decode against the same
// pixels of a full decode, DCT scaling against a full decode shrunk, and damaged files (truncated,
// garbage, a flipped byte, CMYK) refused with an error, never a crash or a gray patch.
#include "data/jpeg.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>

// After size_t and FILE, which it needs.
#include <jpeglib.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "data/augment.hpp"
#include "data/rng.hpp"
#include "test_util.hpp"

namespace hpctrain::data {
namespace {

using testing::info_of;

// A smooth colour image with some texture: what a photo's blocks look like to the DCT.
std::vector<uint8_t> test_image(int w, int h, int c) {
  std::vector<uint8_t> px(static_cast<size_t>(w * h * c));
  SplitMix64 rng(42);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      for (int k = 0; k < c; ++k) {
        const double v = 128 + 90 * std::sin(0.05 * x + 0.7 * k) * std::cos(0.04 * y - 0.3 * k) +
                         static_cast<double>(rng.below(16));
        px[static_cast<size_t>((y * w + x) * c + k)] =
            static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return px;
}

// Encodes with libjpeg: 4:2:0 chroma for colour (libjpeg's default, as most photos), quality 90.
std::vector<uint8_t> encode(const std::vector<uint8_t>& px, int w, int h, int c,
                            J_COLOR_SPACE space = JCS_UNKNOWN) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(w);
  cinfo.image_height = static_cast<JDIMENSION>(h);
  cinfo.input_components = c;
  cinfo.in_color_space = space != JCS_UNKNOWN ? space : c == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, 90, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    auto* row = const_cast<uint8_t*>(px.data() + static_cast<size_t>(cinfo.next_scanline) * w * c);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> bytes(out, out + size);
  std::free(out);
  return bytes;
}

DecodedRegion full(const std::vector<uint8_t>& jpeg) {
  const auto h = read_jpeg_header(jpeg.data(), jpeg.size());
  return decode_region(jpeg.data(), jpeg.size(), {0, 0, h.height, h.width}, h.height, h.width,
                       /*allow_scaling=*/false);
}

std::string error_of(const std::vector<uint8_t>& jpeg) {
  try {
    full(jpeg);
  } catch (const JpegError& e) {
    return e.what();
  }
  return "";
}

TEST(Jpeg, HeaderNamesSizeAndChannels) {
  const auto rgb = encode(test_image(500, 375, 3), 500, 375, 3);
  const auto h = read_jpeg_header(rgb.data(), rgb.size());
  EXPECT_EQ(h.width, 500);
  EXPECT_EQ(h.height, 375);
  EXPECT_EQ(h.channels, 3);
  const auto gray = encode(test_image(33, 17, 1), 33, 17, 1);
  EXPECT_EQ(read_jpeg_header(gray.data(), gray.size()).channels, 1);
}

TEST(Jpeg, FullDecodeIsCloseToTheSource) {
  const auto src = test_image(120, 90, 3);
  const auto d = full(encode(src, 120, 90, 3));
  ASSERT_EQ(d.rows, 90);
  ASSERT_EQ(d.cols, 120);
  double err = 0;
  for (size_t i = 0; i < src.size(); ++i) err += std::abs(int(src[i]) - int(d.pixels[i]));
  EXPECT_LT(err / static_cast<double>(src.size()), 6.0);  // quality 90 with noise
}

// A region decoded alone holds the very pixels a full decode has in the box (the columns widened
// to whole iMCUs and one more, the rows above skipped), at every alignment.
TEST(Jpeg, RegionMatchesTheFullDecodeExactly) {
  for (const int c : {1, 3}) {
    const auto jpeg = encode(test_image(500, 375, c), 500, 375, c);
    const auto whole = full(jpeg);
    for (const PixelBox box :
         {PixelBox{0, 0, 375, 500}, PixelBox{1, 1, 50, 50}, PixelBox{37, 101, 200, 133},
          PixelBox{300, 450, 75, 50}, PixelBox{17, 8, 16, 16}, PixelBox{200, 3, 1, 497}}) {
      const auto r = decode_region(jpeg.data(), jpeg.size(), box, box.height, box.width,
                                   /*allow_scaling=*/false);
      SCOPED_TRACE("channels " + std::to_string(c) + " box " + std::to_string(box.top) + "," +
                   std::to_string(box.left) + " " + std::to_string(box.height) + "x" +
                   std::to_string(box.width));
      ASSERT_EQ(r.scale_eighths, 8);
      ASSERT_EQ(r.rows, box.height);
      ASSERT_GE(r.cols, box.width);
      const auto x0 = static_cast<int64_t>(box.left - r.left);  // where the region starts
      ASSERT_EQ(static_cast<double>(x0), box.left - r.left);
      ASSERT_EQ(r.top, 0.0);
      // The box's pixels (all the resampler reads: its taps stay inside the box).
      const auto from = static_cast<int64_t>(r.left);
      const int64_t to = from + box.width;
      ASSERT_LE(to, r.cols);
      int64_t differ = 0;
      for (int64_t y = 0; y < r.rows; ++y) {
        for (int64_t x = from; x < to; ++x) {
          for (int64_t k = 0; k < c; ++k) {
            const uint8_t a = r.pixels[static_cast<size_t>((y * r.cols + x) * c + k)];
            const uint8_t b =
                whole.pixels[static_cast<size_t>(((box.top + y) * 500 + x0 + x) * c + k)];
            differ += a != b;
          }
        }
      }
      EXPECT_EQ(differ, 0);
    }
  }
}

// DCT scaling: the smallest n/8 that keeps the box at least the output, and the scaled pixels
// are the full decode shrunk (within what a box filter and the DCT's own filter differ by).
TEST(Jpeg, ScalesInTheDctOnlyAsFarAsTheOutputAllows) {
  const auto jpeg = encode(test_image(512, 384, 3), 512, 384, 3);
  const PixelBox whole{0, 0, 384, 512};
  EXPECT_EQ(decode_region(jpeg.data(), jpeg.size(), whole, 384, 512).scale_eighths, 8);
  EXPECT_EQ(decode_region(jpeg.data(), jpeg.size(), whole, 224, 224).scale_eighths, 5);  // 240
  EXPECT_EQ(decode_region(jpeg.data(), jpeg.size(), whole, 48, 64).scale_eighths, 1);
  EXPECT_EQ(decode_region(jpeg.data(), jpeg.size(), whole, 48, 64, false).scale_eighths, 8);
  // A small crop from the big image: no scaling at all.
  EXPECT_EQ(decode_region(jpeg.data(), jpeg.size(), {10, 10, 100, 100}, 224, 224).scale_eighths, 8);
  const auto half = decode_region(jpeg.data(), jpeg.size(), whole, 192, 256);
  ASSERT_EQ(half.scale_eighths, 4);
  ASSERT_EQ(half.rows, 192);
  ASSERT_EQ(half.cols, 256);
  EXPECT_DOUBLE_EQ(half.width, 256.0);
  const auto f = full(jpeg);
  double err = 0;
  for (int64_t y = 0; y < 192; ++y) {
    for (int64_t x = 0; x < 256; ++x) {
      for (int64_t k = 0; k < 3; ++k) {
        double box = 0;
        for (int dy = 0; dy < 2; ++dy) {
          for (int dx = 0; dx < 2; ++dx) {
            box += f.pixels[static_cast<size_t>(((2 * y + dy) * 512 + 2 * x + dx) * 3 + k)];
          }
        }
        err += std::abs(box / 4 - half.pixels[static_cast<size_t>((y * 256 + x) * 3 + k)]);
      }
    }
  }
  EXPECT_LT(err / (192.0 * 256 * 3), 4.0);
}

TEST(Jpeg, DamagedFilesAreErrorsNotCrashes) {
  const auto good = encode(test_image(200, 150, 3), 200, 150, 3);
  EXPECT_EQ(error_of(good), "");
  // Truncated: libjpeg would fill the rest gray with a warning; we refuse it.
  auto cut = good;
  cut.resize(good.size() / 2);
  EXPECT_NE(error_of(cut).find("JPEG: "), std::string::npos) << error_of(cut);
  // Not a JPEG at all, an empty buffer, the header alone.
  const std::vector<uint8_t> text = {'h', 'e', 'l', 'l', 'o'};
  EXPECT_NE(error_of(text).find("Not a JPEG file"), std::string::npos) << error_of(text);
  EXPECT_NE(error_of({}).find("JPEG: "), std::string::npos);
  EXPECT_NE(error_of(std::vector<uint8_t>(good.begin(), good.begin() + 200)).find("JPEG: "),
            std::string::npos);
  // CMYK: refused by name.
  const auto cmyk = encode(test_image(40, 30, 4), 40, 30, 4, JCS_CMYK);
  EXPECT_NE(error_of(cmyk).find("4 components"), std::string::npos) << error_of(cmyk);
  // Every byte of the entropy-coded data flipped in turn (a sample of them): an error or a
  // decode, never a crash; a flipped marker byte is an error.
  SplitMix64 rng(7);
  int errors = 0;
  for (int i = 0; i < 300; ++i) {
    auto bad = good;
    const size_t at = static_cast<size_t>(rng.below(bad.size()));
    bad[at] ^= static_cast<uint8_t>(1 + rng.below(255));
    if (!error_of(bad).empty()) ++errors;
  }
  EXPECT_GT(errors, 0);
}

// apply_jpeg draws the same crop and flip as apply() on the decoded image (the same random
// stream), and where no DCT scaling applies it produces the very same output: the JPEG path is
// the raw path's geometry on the whole image (for evaluation, where the raw path also crops 7/8
// of the shorter side).
TEST(JpegTransform, SameGeometryAndOutputAsTheDecodedImageWithoutScaling) {
  const int w = 500, h = 375;
  const auto jpeg = encode(test_image(w, h, 3), w, h, 3);
  const auto decoded = full(jpeg);
  for (const bool train : {true, false}) {
    TransformConfig cfg;
    cfg.augment = Augment::kRandomResizedCrop;
    cfg.train = train;
    // n = 7 would need a crop of 434 px (train: taller than the image) or, for the evaluation
    // crop of 328 px (7/8 of the shorter side, as torchvision), an output of 287 at most.
    cfg.image_size = train ? 380 : 300;
    cfg.layout = Layout::kNHWC;
    cfg.output = OutputType::kUint8;
    const Transform t(cfg, info_of(h, w, 3));
    std::vector<uint8_t> a(t.sample_output_bytes()), b(t.sample_output_bytes());
    for (int64_t index = 0; index < 20; ++index) {
      t.apply(decoded.pixels.data(), /*seed=*/11, /*epoch=*/2, index, a.data());
      t.apply_jpeg(jpeg.data(), jpeg.size(), 11, 2, index, b.data());
      ASSERT_EQ(a, b) << (train ? "train" : "eval") << " sample " << index;
    }
  }
}

// With DCT scaling the output is the same picture: close to the full-resolution path (the DCT's
// n/8 scaling filters where bilinear taps alias), never garbage.
TEST(JpegTransform, DctScaledOutputIsCloseToTheFullResolutionPath) {
  const int w = 500, h = 375;
  const auto jpeg = encode(test_image(w, h, 3), w, h, 3);
  const auto decoded = full(jpeg);
  TransformConfig cfg;
  cfg.augment = Augment::kRandomResizedCrop;
  cfg.image_size = 64;
  cfg.layout = Layout::kNHWC;
  cfg.output = OutputType::kUint8;
  for (const bool train : {true, false}) {
    cfg.train = train;
    const Transform t(cfg, info_of(h, w, 3));
    std::vector<uint8_t> a(t.sample_output_bytes()), b(t.sample_output_bytes());
    double total = 0;
    for (int64_t index = 0; index < 20; ++index) {
      t.apply(decoded.pixels.data(), 3, 0, index, a.data());
      t.apply_jpeg(jpeg.data(), jpeg.size(), 3, 0, index, b.data());
      for (size_t i = 0; i < a.size(); ++i) total += std::abs(int(a[i]) - int(b[i]));
    }
    EXPECT_LT(total / (20.0 * static_cast<double>(a.size())), 8.0) << (train ? "train" : "eval");
  }
  // A JPEG of other channels than the dataset's, and a damaged one, are errors.
  const Transform gray(cfg, info_of(h, w, 1));
  std::vector<uint8_t> out(gray.sample_output_bytes());
  EXPECT_THROW(gray.apply_jpeg(jpeg.data(), jpeg.size(), 3, 0, 0, out.data()), JpegError);
  const Transform rgb(cfg, info_of(h, w, 3));
  out.resize(rgb.sample_output_bytes());
  EXPECT_THROW(rgb.apply_jpeg(jpeg.data(), jpeg.size() / 3, 3, 0, 0, out.data()), JpegError);
}

// Every geometry the transforms can meet, at random: tiny and odd images, grayscale and colour,
// outputs smaller and larger than the crop, training and evaluation. Each sample decodes and
// resamples within its buffers (the sanitizer build runs this too) and, where the same crop of
// the decoded image needs no DCT scaling, gives the raw path's bytes.
TEST(JpegTransform, RandomGeometriesStayInBoundsAndAgreeWithTheRawPath) {
  SplitMix64 rng(2026);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const auto w = static_cast<int>(1 + rng.below(300));
    const auto h = static_cast<int>(1 + rng.below(300));
    const int c = rng.below(2) == 0 ? 1 : 3;
    const auto jpeg = encode(test_image(w, h, c), w, h, c);
    const auto decoded = full(jpeg);
    TransformConfig cfg;
    cfg.augment = Augment::kRandomResizedCrop;
    cfg.train = rng.below(2) == 0;
    cfg.image_size = static_cast<int64_t>(1 + rng.below(160));
    cfg.layout = rng.below(2) == 0 ? Layout::kNHWC : Layout::kNCHW;
    cfg.output = rng.below(2) == 0 ? OutputType::kUint8 : OutputType::kFloat32;
    const Transform t(cfg, info_of(h, w, c));
    std::vector<uint8_t> a(t.sample_output_bytes()), b(t.sample_output_bytes());
    for (int64_t index = 0; index < 4; ++index) {
      SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h) + "x" + std::to_string(c) + " out " +
                   std::to_string(cfg.image_size) + (cfg.train ? " train" : " eval") + " sample " +
                   std::to_string(index));
      t.apply_jpeg(jpeg.data(), jpeg.size(), 5, 1, index, b.data());
      // No DCT scaling can apply when the image is at most 8/7 of the output. The evaluation
      // crops agree where the raw path too keeps 7/8 of the shorter side: a larger image than the
      // output (the JPEG path follows torchvision's geometry for every size).
      const int64_t side = std::min(w, h);
      if (side * 7 < cfg.image_size * 8 && (cfg.train || side > cfg.image_size)) {
        t.apply(decoded.pixels.data(), 5, 1, index, a.data());
        ASSERT_EQ(a, b);
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 60);
}

}  // namespace
}  // namespace hpctrain::data
