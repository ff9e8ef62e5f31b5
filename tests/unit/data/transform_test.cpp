// Transform (augment.hpp): exact evaluation path, layouts, and that every augmentation is a
// pure function of (seed, epoch, sample index) producing what its geometry says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "data/augment.hpp"
#include "data/rng.hpp"
#include "test_util.hpp"

namespace hpctrain::data {
namespace {

using testing::info_of;

std::vector<uint8_t> image(int64_t h, int64_t w, int64_t c) {
  std::vector<uint8_t> img(h * w * c);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>((i * 37 + 11) & 0xff);
  return img;
}

template <typename T>
std::vector<T> run(const Transform& t, const std::vector<uint8_t>& src, int64_t index,
                   uint64_t seed = 1, int64_t epoch = 0) {
  std::vector<T> out(t.sample_output_bytes() / sizeof(T));
  t.apply(src.data(), seed, epoch, index, out.data());
  return out;
}

TEST(Transform, EvalIsExactNormalisationInBothLayouts) {
  const int64_t h = 5, w = 7, c = 3;
  const auto src = image(h, w, c);
  TransformConfig cfg;
  cfg.train = false;
  cfg.augment = Augment::kCropFlip;  // ignored when not training
  const Transform nchw(cfg, info_of(h, w, c));
  cfg.layout = Layout::kNHWC;
  const Transform nhwc(cfg, info_of(h, w, c));
  const auto a = run<float>(nchw, src, 3);
  const auto b = run<float>(nhwc, src, 3);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const float expect = (src[(y * w + x) * c + ch] / 255.0f - 0.25f) / 0.5f;
        ASSERT_NEAR(a[ch * h * w + y * w + x], expect, 1e-5);
        ASSERT_NEAR(b[(y * w + x) * c + ch], expect, 1e-5);
      }
    }
  }
  cfg.output = OutputType::kUint8;
  const Transform raw(cfg, info_of(h, w, c));
  EXPECT_EQ(run<uint8_t>(raw, src, 0), src);
}

// Reference for crop_flip: the zero-padded shifted/flipped image.
std::vector<uint8_t> shifted(const std::vector<uint8_t>& src, int64_t h, int64_t w, int64_t c,
                             int64_t dy, int64_t dx, bool flip) {
  std::vector<uint8_t> out(h * w * c, 0);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const int64_t sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
      if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
      for (int64_t ch = 0; ch < c; ++ch) out[(y * w + x) * c + ch] = src[(sy * w + sx) * c + ch];
    }
  }
  return out;
}

TEST(Transform, CropFlipIsAPaddedShiftAndDeterministic) {
  const int64_t h = 8, w = 8, c = 3, pad = 2;
  const auto src = image(h, w, c);
  TransformConfig cfg;
  cfg.augment = Augment::kCropFlip;
  cfg.crop_padding = pad;
  cfg.layout = Layout::kNHWC;
  cfg.output = OutputType::kUint8;
  const Transform t(cfg, info_of(h, w, c));
  int flips = 0, shifts = 0;
  for (int64_t index = 0; index < 200; ++index) {
    const auto out = run<uint8_t>(t, src, index);
    ASSERT_EQ(out, run<uint8_t>(t, src, index));  // pure function
    bool matched = false;
    for (int64_t dy = -pad; dy <= pad && !matched; ++dy) {
      for (int64_t dx = -pad; dx <= pad && !matched; ++dx) {
        for (bool flip : {false, true}) {
          if (out == shifted(src, h, w, c, dy, dx, flip)) {
            matched = true;
            flips += flip;
            shifts += dy != 0 || dx != 0;
            break;
          }
        }
      }
    }
    ASSERT_TRUE(matched) << "sample " << index;
  }
  // Both choices are actually random (p = 0.5 flip; 24 of 25 offsets shift).
  EXPECT_GT(flips, 60);
  EXPECT_LT(flips, 140);
  EXPECT_GT(shifts, 150);
  EXPECT_NE(run<uint8_t>(t, src, 5, /*seed=*/1, /*epoch=*/0),
            run<uint8_t>(t, src, 5, /*seed=*/1, /*epoch=*/1));
}

TEST(Transform, CropFlipOffsetsAreUniformOverThePadding) {
  // Each of the 2 * pad + 1 vertical and horizontal shifts equally likely (chi-square, 4 degrees
  // of freedom, below 18.47: p = 0.001), every combination seen: a range one short or shifted,
  // or one axis left unshifted, is far outside.
  const int64_t h = 6, w = 6, c = 1, pad = 2, n = 5000;
  const auto src = image(h, w, c);
  TransformConfig cfg;
  cfg.augment = Augment::kCropFlip;
  cfg.crop_padding = pad;
  cfg.flip_probability = 0.0;
  cfg.layout = Layout::kNHWC;
  cfg.output = OutputType::kUint8;
  const Transform t(cfg, info_of(h, w, c));
  std::vector<std::vector<uint8_t>> shifts;  // [(dy + pad) * 5 + dx + pad]
  for (int64_t dy = -pad; dy <= pad; ++dy) {
    for (int64_t dx = -pad; dx <= pad; ++dx) shifts.push_back(shifted(src, h, w, c, dy, dx, false));
  }
  std::vector<int64_t> by_y(2 * pad + 1), by_x(2 * pad + 1), both(shifts.size());
  for (int64_t index = 0; index < n; ++index) {
    const auto out = run<uint8_t>(t, src, index);
    const auto it = std::find(shifts.begin(), shifts.end(), out);
    ASSERT_NE(it, shifts.end()) << "sample " << index << " is no shift of the padded image";
    const auto k = it - shifts.begin();
    ++by_y[static_cast<size_t>(k / (2 * pad + 1))];
    ++by_x[static_cast<size_t>(k % (2 * pad + 1))];
    ++both[static_cast<size_t>(k)];
  }
  auto chi_square = [&](const std::vector<int64_t>& counts) {
    const double expected = static_cast<double>(n) / static_cast<double>(counts.size());
    double sum = 0;
    for (int64_t count : counts)
      sum += std::pow(static_cast<double>(count) - expected, 2) / expected;
    return sum;
  };
  EXPECT_LT(chi_square(by_y), 18.47);
  EXPECT_LT(chi_square(by_x), 18.47);
  for (size_t k = 0; k < both.size(); ++k) EXPECT_GT(both[k], 0) << "shift " << k << " never drawn";
}

TEST(Transform, RandomResizedCropOutputsTheSizeAndInterpolates) {
  const int64_t h = 40, w = 30, c = 3;
  std::vector<uint8_t> flat(h * w * c, 77);
  TransformConfig cfg;
  cfg.augment = Augment::kRandomResizedCrop;
  cfg.image_size = 16;
  cfg.output = OutputType::kUint8;
  const Transform t(cfg, info_of(h, w, c));
  EXPECT_EQ(t.out_height(), 16);
  for (int64_t i = 0; i < 50; ++i) {
    const auto out = run<uint8_t>(t, flat, i);
    ASSERT_EQ(out.size(), 16u * 16 * 3);
    for (uint8_t v : out) ASSERT_EQ(v, 77);  // a constant image stays constant
  }
  const auto src = image(h, w, c);
  EXPECT_EQ(run<uint8_t>(t, src, 9), run<uint8_t>(t, src, 9));
  EXPECT_NE(run<uint8_t>(t, src, 9), run<uint8_t>(t, src, 10));
}

TEST(Transform, EvalResizeIsCenteredAndSeedFree) {
  const int64_t h = 64, w = 48, c = 1;
  // A horizontal ramp: the center crop of a symmetric ramp is symmetric.
  std::vector<uint8_t> src(h * w);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) src[y * w + x] = static_cast<uint8_t>(x * 5);
  }
  TransformConfig cfg;
  cfg.train = false;
  cfg.image_size = 24;
  cfg.output = OutputType::kUint8;
  const Transform t(cfg, info_of(h, w, c));
  const auto a = run<uint8_t>(t, src, 1, /*seed=*/1);
  EXPECT_EQ(a, run<uint8_t>(t, src, 2, /*seed=*/99));
  // 0.875 of 48 = 42 columns starting at 3: the first output column samples near x = 3.4.
  EXPECT_NEAR(a[0], 5 * 3.375, 1.0);
  EXPECT_NEAR(a[23], 5 * 43.625, 1.0);
}

// torchvision's center_crop starts at int(round(excess / 2.0)), Python rounding halves to even:
// for excess 0..8 (checked with torchvision 0.26's F.center_crop). Floor division gives 1 for 3
// and 3 for 7; rounding halves up gives 1 for 1 and 3 for 5.
TEST(CenterCropBox, OffsetsRoundHalvesToEvenLikeTorchvision) {
  const int64_t torchvision[] = {0, 0, 1, 2, 2, 2, 3, 4, 4};
  const TransformConfig cfg;
  for (int64_t excess = 0; excess <= 8; ++excess) {
    // The whole shorter side (10) when the output is not smaller: only the offset is rounded.
    const PixelBox tall = center_crop_box(10 + excess, 10, 10, 10, cfg, false);
    EXPECT_EQ(tall.top, torchvision[excess]) << "height excess " << excess;
    EXPECT_EQ(tall.left, 0);
    EXPECT_EQ(tall.height, 10);
    const PixelBox wide = center_crop_box(10, 10 + excess, 10, 10, cfg, false);
    EXPECT_EQ(wide.left, torchvision[excess]) << "width excess " << excess;
    // The JPEG path's Resize(256) + CenterCrop(224) where the shorter side is 256: the crop is
    // 224 at torchvision's offsets in both directions.
    const PixelBox jpeg = center_crop_box(256, 256 + excess, 224, 224, cfg, true);
    EXPECT_EQ(jpeg.height, 224);
    EXPECT_EQ(jpeg.top, 16);
    EXPECT_EQ(jpeg.left, 16 + torchvision[excess]) << "JPEG rule, width excess " << excess;
    EXPECT_EQ(center_crop_box(256 + excess, 256, 224, 224, cfg, true).top,
              16 + torchvision[excess]);
  }
}

// Kolmogorov-Smirnov D * sqrt(n) of samples against the uniform distribution on [lo, hi].
double ks_uniform(std::vector<double> x, double lo, double hi) {
  std::sort(x.begin(), x.end());
  const auto n = static_cast<double>(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = (x[i] - lo) / (hi - lo);
    d = std::max({d, (static_cast<double>(i) + 1) / n - f, f - static_cast<double>(i) / n});
  }
  return d * std::sqrt(n);
}

// torchvision draws the aspect ratio log-uniformly and the area uniformly. With scale 0.08-0.5 on
// a large image every try fits, so the boxes show both distributions undistorted: KS D * sqrt(n)
// below 1.95 (p = 0.001) for 4000 draws; a ratio drawn uniformly gives about 4.5.
// crop_geometry_check.py compares with torchvision's own draws.
TEST(RandomResizedCropBox, LogRatioAndAreaAreUniform) {
  TransformConfig cfg;
  cfg.max_scale = 0.5;
  const int64_t h = 3000, w = 4000;
  std::vector<double> log_ratio, area;
  for (uint64_t i = 0; i < 4000; ++i) {
    SplitMix64 rng(derive_key(11, 0, i, kAugmentDomain));
    const PixelBox b = random_resized_crop_box(h, w, cfg, rng);
    ASSERT_TRUE(b.top >= 0 && b.left >= 0 && b.top + b.height <= h && b.left + b.width <= w);
    log_ratio.push_back(std::log(static_cast<double>(b.width) / static_cast<double>(b.height)));
    area.push_back(static_cast<double>(b.height * b.width) / static_cast<double>(h * w));
  }
  EXPECT_LT(ks_uniform(log_ratio, std::log(cfg.min_ratio), std::log(cfg.max_ratio)), 1.95);
  EXPECT_LT(ks_uniform(area, cfg.min_scale, cfg.max_scale), 1.95);
}

TEST(Transform, RejectsImpossibleConfigs) {
  TransformConfig cfg;
  cfg.augment = Augment::kCropFlip;
  cfg.crop_padding = 2;
  cfg.image_size = 40;
  EXPECT_THROW(Transform(cfg, info_of(32, 32, 3)), rt::DataError);
  cfg.image_size = 36;
  EXPECT_NO_THROW(Transform(cfg, info_of(32, 32, 3)));
  cfg.image_size = -1;
  EXPECT_THROW(Transform(cfg, info_of(32, 32, 3)), rt::DataError);
}

}  // namespace
}  // namespace hpctrain::data
