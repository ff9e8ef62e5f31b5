// The horizontal flip of random_resized_crop (augment.hpp), pixel for pixel: on a fixed image
// with no left-right symmetry, a crop box pinned to the whole image and outputs small enough to
// work out by hand, each output must equal the unflipped or the mirrored expectation exactly, and
// the seeds must give both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "data/augment.hpp"

namespace hpctrain::data {
namespace {

constexpr int64_t kSide = 8, kChannels = 2;

// No row reads the same backwards (the tests check it).
std::vector<uint8_t> asymmetric_image() {
  std::vector<uint8_t> img(kSide * kSide * kChannels);
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(3 * i + 7);
  return img;
}

// Outputs the pixel values themselves: mean 0 and std 1/255 make normalisation the identity.
DatasetInfo identity_info() {
  return {/*num_samples=*/1,
          kSide,
          kSide,
          kChannels,
          /*num_classes=*/2,
          /*class_names=*/{},
          std::vector<double>(kChannels, 0.0),
          std::vector<double>(kChannels, 1.0 / 255.0),
          /*chunk_images=*/0};
}

// random_resized_crop whose box can only be the whole (square) image, resized to `out_side`.
TransformConfig whole_image_crop(int64_t out_side, double flip_probability) {
  TransformConfig cfg;
  cfg.augment = Augment::kRandomResizedCrop;
  cfg.image_size = out_side;
  cfg.min_scale = cfg.max_scale = 1.0;
  cfg.min_ratio = cfg.max_ratio = 1.0;
  cfg.flip_probability = flip_probability;
  return cfg;
}

std::vector<float> apply(const Transform& t, const std::vector<uint8_t>& src, int64_t index,
                         uint64_t seed = 7) {
  std::vector<float> out(t.sample_output_bytes() / sizeof(float));
  t.apply(src.data(), seed, /*epoch=*/0, index, out.data());
  return out;
}

// The expectation, worked out without the transform: halving each side averages 2x2 blocks
// (bilinear, align_corners=False, at exactly half-pixel positions); a flip reads the blocks from
// the right. NCHW output.
std::vector<float> expected_half(const std::vector<uint8_t>& src, bool flip) {
  const int64_t out = kSide / 2;
  std::vector<float> want(static_cast<size_t>(out * out * kChannels));
  for (int64_t ch = 0; ch < kChannels; ++ch) {
    for (int64_t y = 0; y < out; ++y) {
      for (int64_t x = 0; x < out; ++x) {
        const int64_t bx = flip ? out - 1 - x : x;
        double sum = 0;
        for (int64_t dy = 0; dy < 2; ++dy) {
          for (int64_t dx = 0; dx < 2; ++dx) {
            sum += src[static_cast<size_t>(((2 * y + dy) * kSide + 2 * bx + dx) * kChannels + ch)];
          }
        }
        want[static_cast<size_t>((ch * out + y) * out + x)] = static_cast<float>(sum / 4);
      }
    }
  }
  return want;
}

// Same size: the crop is the image itself, mirrored or not.
std::vector<float> expected_same(const std::vector<uint8_t>& src, bool flip) {
  std::vector<float> want(src.size());
  for (int64_t ch = 0; ch < kChannels; ++ch) {
    for (int64_t y = 0; y < kSide; ++y) {
      for (int64_t x = 0; x < kSide; ++x) {
        const int64_t sx = flip ? kSide - 1 - x : x;
        want[static_cast<size_t>((ch * kSide + y) * kSide + x)] =
            src[static_cast<size_t>((y * kSide + sx) * kChannels + ch)];
      }
    }
  }
  return want;
}

// torch's bilinear resize (upsample_bilinear2d, align_corners=False, no antialiasing), worked out
// here on its own: output pixel d of a side resized from `in` to `out` samples the source at
// (d + 0.5) * in / out - 0.5, clamped at 0 below, between pixel floor(s) and the next one (the last
// pixel at the far edge). NCHW output.
std::vector<float> expected_torch_bilinear(const std::vector<uint8_t>& src, int64_t out) {
  struct Tap {
    int64_t i0, i1;
    double f;
  };
  std::vector<Tap> taps;
  const double scale = static_cast<double>(kSide) / static_cast<double>(out);
  for (int64_t d = 0; d < out; ++d) {
    const double s = std::max(0.0, (static_cast<double>(d) + 0.5) * scale - 0.5);
    const auto i0 = static_cast<int64_t>(std::floor(s));
    taps.push_back({i0, std::min(i0 + 1, kSide - 1), s - static_cast<double>(i0)});
  }
  std::vector<float> want(static_cast<size_t>(out * out * kChannels));
  auto at = [&](int64_t y, int64_t x, int64_t ch) {
    return static_cast<double>(src[static_cast<size_t>((y * kSide + x) * kChannels + ch)]);
  };
  for (int64_t ch = 0; ch < kChannels; ++ch) {
    for (int64_t y = 0; y < out; ++y) {
      const Tap ty = taps[static_cast<size_t>(y)];
      for (int64_t x = 0; x < out; ++x) {
        const Tap tx = taps[static_cast<size_t>(x)];
        const double top =
            at(ty.i0, tx.i0, ch) + tx.f * (at(ty.i0, tx.i1, ch) - at(ty.i0, tx.i0, ch));
        const double bottom =
            at(ty.i1, tx.i0, ch) + tx.f * (at(ty.i1, tx.i1, ch) - at(ty.i1, tx.i0, ch));
        want[static_cast<size_t>((ch * out + y) * out + x)] =
            static_cast<float>(top + ty.f * (bottom - top));
      }
    }
  }
  return want;
}

TEST(AugmentFlip, BilinearSamplesWhereTorchsResizeDoes) {
  // Ratios that put the taps between pixels, at the clamped near edge and at the far edge, down
  // and up: a half-pixel shift or a tap one pixel off moves outputs by several grey levels.
  const auto src = asymmetric_image();
  for (int64_t side : {3, 5, 7, 11, 13}) {
    SCOPED_TRACE("output side " + std::to_string(side));
    const Transform never(whole_image_crop(side, 0.0), identity_info());
    const auto got = apply(never, src, 0);
    const auto want = expected_torch_bilinear(src, side);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-3) << "output " << i;
  }
}

TEST(AugmentFlip, AlwaysAndNeverFlipGiveTheMirrorAndTheImage) {
  const auto src = asymmetric_image();
  for (int64_t side : {kSide, kSide / 2}) {
    SCOPED_TRACE("output side " + std::to_string(side));
    auto expected = side == kSide ? expected_same : expected_half;
    ASSERT_NE(expected(src, true), expected(src, false)) << "the image is symmetric";
    const Transform always(whole_image_crop(side, 1.0), identity_info());
    const Transform never(whole_image_crop(side, 0.0), identity_info());
    EXPECT_EQ(apply(always, src, 0), expected(src, true));
    EXPECT_EQ(apply(never, src, 0), expected(src, false));
  }
}

TEST(AugmentFlip, SeedsFlipAboutHalfTheSamplesExactly) {
  const auto src = asymmetric_image();
  const Transform t(whole_image_crop(kSide / 2, 0.5), identity_info());
  const auto mirrored = expected_half(src, true), plain = expected_half(src, false);
  int flipped = 0;
  int64_t first_flipped = -1;
  for (int64_t index = 0; index < 64; ++index) {
    const auto out = apply(t, src, index);
    if (out == mirrored) {
      ++flipped;
      if (first_flipped < 0) first_flipped = index;
    } else {
      EXPECT_EQ(out, plain) << "sample " << index << " is neither the image nor its mirror";
    }
  }
  EXPECT_GE(first_flipped, 0) << "no sample of 64 was flipped";
  EXPECT_GT(flipped, 16);
  EXPECT_LT(flipped, 48);
  // The flip is part of the sample's pure function: the same index flips again.
  if (first_flipped >= 0) {
    EXPECT_EQ(apply(t, src, first_flipped), mirrored);
  }
}

TEST(AugmentFlip, FlipOfARandomBoxIsItsExactMirror) {
  // Random boxes and ratios: the flip draw comes after the box, so with the same seed the flipped
  // output must be the unflipped one read right to left.
  const auto src = asymmetric_image();
  TransformConfig cfg;
  cfg.augment = Augment::kRandomResizedCrop;
  cfg.image_size = 5;
  cfg.flip_probability = 1.0;
  const Transform always(cfg, identity_info());
  cfg.flip_probability = 0.0;
  const Transform never(cfg, identity_info());
  for (int64_t index = 0; index < 16; ++index) {
    const auto flipped = apply(always, src, index), plain = apply(never, src, index);
    for (int64_t ch = 0; ch < kChannels; ++ch) {
      for (int64_t y = 0; y < 5; ++y) {
        for (int64_t x = 0; x < 5; ++x) {
          ASSERT_EQ(flipped[static_cast<size_t>((ch * 5 + y) * 5 + x)],
                    plain[static_cast<size_t>((ch * 5 + y) * 5 + 4 - x)])
              << "sample " << index << " channel " << ch << " at (" << y << ", " << x << ")";
        }
      }
    }
  }
}

}  // namespace
}  // namespace hpctrain::data
