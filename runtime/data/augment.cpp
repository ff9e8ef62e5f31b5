#include "data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.hpp"
#include "data/jpeg.hpp"
#include "data/rng.hpp"

namespace hpctrain::data {

namespace {

// Writes one output element. Planar (NCHW) or interleaved (NHWC); float normalised or uint8.
template <typename Out, bool kPlanar>
struct Sink {
  Out* base;
  int64_t plane;  // out_h * out_w
  int64_t c;
  const float* scale;
  const float* bias;

  void put(int64_t pixel, int64_t ch, float v) const {
    Out* p = kPlanar ? base + ch * plane + pixel : base + pixel * c + ch;
    if constexpr (std::is_same_v<Out, float>) {
      *p = v * scale[ch] + bias[ch];
    } else {
      // Rounds half up, as lround does for these non-negative values, without a libm call.
      *p = static_cast<uint8_t>(std::clamp(v, 0.0f, 255.0f) + 0.5f);
    }
  }
  void put_exact(int64_t pixel, int64_t ch, uint8_t v) const {
    Out* p = kPlanar ? base + ch * plane + pixel : base + pixel * c + ch;
    if constexpr (std::is_same_v<Out, float>) {
      *p = static_cast<float>(v) * scale[ch] + bias[ch];
    } else {
      *p = v;
    }
  }
};

// Integer-offset crop of a zero-padded image (no resampling): output (y, x) reads source
// (y + dy, x' + dx) where x' is x or its mirror; outside the source reads 0.
template <typename SinkT>
void shift_kernel(const uint8_t* src, int64_t h, int64_t w, int64_t c, int64_t out_h, int64_t out_w,
                  int64_t dy, int64_t dx, bool flip, const SinkT& sink) {
  for (int64_t y = 0; y < out_h; ++y) {
    const int64_t sy = y + dy;
    const bool row_in = sy >= 0 && sy < h;
    for (int64_t x = 0; x < out_w; ++x) {
      const int64_t sx = (flip ? out_w - 1 - x : x) + dx;
      const int64_t pixel = y * out_w + x;
      if (row_in && sx >= 0 && sx < w) {
        const uint8_t* s = src + (sy * w + sx) * c;
        for (int64_t ch = 0; ch < c; ++ch) sink.put_exact(pixel, ch, s[ch]);
      } else {
        for (int64_t ch = 0; ch < c; ++ch) sink.put_exact(pixel, ch, 0);
      }
    }
  }
}

struct Tap {
  int64_t i0, i1;
  float f;  // weight of i1
};

// Bilinear taps (align_corners=False) for resizing the `len` source pixels from `offset` to `out`
// pixels, clamped to the pixels [lo, hi] that hold the box. The box is whole pixels in an image
// (offset and len integers, lo = offset, hi = offset + len - 1), or sub-pixel in a JPEG decoded at
// a DCT scale (data/jpeg.hpp).
void taps(double offset, double len, int64_t lo, int64_t hi, int64_t out, bool flip,
          std::vector<Tap>& t) {
  t.resize(static_cast<size_t>(out));
  const double step = len / static_cast<double>(out);
  // Relative to lo, so that a whole-pixel box (offset == lo) computes exactly what it always did.
  const double shift = offset - static_cast<double>(lo);
  const auto last = static_cast<double>(hi - lo);
  for (int64_t o = 0; o < out; ++o) {
    double s = shift + (static_cast<double>(o) + 0.5) * step - 0.5;
    s = std::clamp(s, 0.0, last);
    const auto i0 = static_cast<int64_t>(s);
    const int64_t i1 = std::min(i0 + 1, hi - lo);
    const int64_t slot = flip ? out - 1 - o : o;
    t[static_cast<size_t>(slot)] = {lo + i0, lo + i1,
                                    static_cast<float>(s - static_cast<double>(i0))};
  }
}

// The box to resample, in the source's pixel coordinates, and the pixels that hold it.
struct ResampleBox {
  double top, left, height, width;
  int64_t row_lo, row_hi, col_lo, col_hi;
};

ResampleBox whole_pixels(int64_t top, int64_t left, int64_t height, int64_t width) {
  return {static_cast<double>(top),
          static_cast<double>(left),
          static_cast<double>(height),
          static_cast<double>(width),
          top,
          top + height - 1,
          left,
          left + width - 1};
}

// The bilinear loop with the channel count C known at compile time (0: `c` at run time), so the
// per-channel loop unrolls and the tap offsets are multiplied once per pixel.
template <int64_t C, typename SinkT>
void resample_loop(const uint8_t* src, int64_t w, int64_t c, const std::vector<Tap>& xt,
                   const std::vector<Tap>& yt, int64_t out_h, int64_t out_w, const SinkT& sink) {
  const int64_t cc = C > 0 ? C : c;
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap ty = yt[static_cast<size_t>(y)];
    const uint8_t* r0 = src + ty.i0 * w * cc;
    const uint8_t* r1 = src + ty.i1 * w * cc;
    for (int64_t x = 0; x < out_w; ++x) {
      const Tap tx = xt[static_cast<size_t>(x)];
      const int64_t pixel = y * out_w + x;
      const uint8_t* p00 = r0 + tx.i0 * cc;
      const uint8_t* p01 = r0 + tx.i1 * cc;
      const uint8_t* p10 = r1 + tx.i0 * cc;
      const uint8_t* p11 = r1 + tx.i1 * cc;
      for (int64_t ch = 0; ch < cc; ++ch) {
        const float a = p00[ch] + tx.f * (p01[ch] - p00[ch]);
        const float b = p10[ch] + tx.f * (p11[ch] - p10[ch]);
        sink.put(pixel, ch, a + ty.f * (b - a));
      }
    }
  }
}

template <typename SinkT>
void resample_kernel(const uint8_t* src, int64_t w, int64_t c, const ResampleBox& box,
                     int64_t out_h, int64_t out_w, bool flip, const SinkT& sink) {
  thread_local std::vector<Tap> xt, yt;
  taps(box.left, box.width, box.col_lo, box.col_hi, out_w, flip, xt);
  taps(box.top, box.height, box.row_lo, box.row_hi, out_h, /*flip=*/false, yt);
  if (c == 3) {
    resample_loop<3>(src, w, c, xt, yt, out_h, out_w, sink);
  } else if (c == 1) {
    resample_loop<1>(src, w, c, xt, yt, out_h, out_w, sink);
  } else {
    resample_loop<0>(src, w, c, xt, yt, out_h, out_w, sink);
  }
}

// torchvision's center_crop offset for a side `excess` pixels longer than the crop:
// int(round(excess / 2.0)), and Python rounds halves to even (excess 3 starts at 2, 7 at 4, 5 at
// 2), where floor division would start at 1, 3 and 2.
int64_t center_offset(int64_t excess) {
  const int64_t half = excess / 2;
  return half + (excess & half & 1);
}

}  // namespace

PixelBox random_resized_crop_box(int64_t h, int64_t w, const TransformConfig& config,
                                 SplitMix64& rng) {
  // torchvision's RandomResizedCrop.get_params: 10 tries at a random area and log-uniform
  // aspect ratio, then a center crop clamped to the ratio range. Its round() is Python's, halves
  // to even: std::nearbyint in the default rounding mode.
  const double area = static_cast<double>(h * w);
  const double log_lo = std::log(config.min_ratio), log_hi = std::log(config.max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(config.min_scale, config.max_scale);
    const double ratio = std::exp(rng.uniform(log_lo, log_hi));
    const auto cw = static_cast<int64_t>(std::nearbyint(std::sqrt(target * ratio)));
    const auto ch = static_cast<int64_t>(std::nearbyint(std::sqrt(target / ratio)));
    if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
      const int64_t top = rng.between(0, h - ch);
      return {top, rng.between(0, w - cw), ch, cw};
    }
  }
  // The fallback's offsets are floor divisions in torchvision too.
  const double in_ratio = static_cast<double>(w) / static_cast<double>(h);
  int64_t cw = w, ch = h;
  if (in_ratio < config.min_ratio) {
    ch = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / config.min_ratio));
  } else if (in_ratio > config.max_ratio) {
    cw = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * config.max_ratio));
  }
  return {(h - ch) / 2, (w - cw) / 2, ch, cw};
}

PixelBox center_crop_box(int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                         const TransformConfig& config, bool fraction_always) {
  const int64_t side = std::min(h, w);
  const bool downscale = fraction_always || side > std::max(out_h, out_w);
  const auto crop = downscale ? std::max<int64_t>(1, std::lround(static_cast<double>(side) *
                                                                 config.center_crop_fraction))
                              : side;
  return {center_offset(h - crop), center_offset(w - crop), crop, crop};
}

Transform::Transform(const TransformConfig& config, const DatasetInfo& info)
    : config_(config),
      h_(info.height),
      w_(info.width),
      c_(info.channels),
      out_h_(config.image_size > 0 ? config.image_size : info.height),
      out_w_(config.image_size > 0 ? config.image_size : info.width) {
  if (h_ < 1 || w_ < 1 || c_ < 1 || static_cast<int64_t>(info.mean.size()) != c_ ||
      static_cast<int64_t>(info.std.size()) != c_) {
    HPCTRAIN_THROW(rt::DataError, "transform: dataset summary is incomplete");
  }
  if (config.image_size < 0 || config.image_size > kMaxSide) {
    HPCTRAIN_THROW(rt::DataError, "transform: image_size " + std::to_string(config.image_size) +
                                      " outside [0, " + std::to_string(kMaxSide) + "]");
  }
  if (info.encoding != Encoding::kRaw) {
    if (config.image_size == 0) {
      HPCTRAIN_THROW(rt::DataError,
                     "transform: JPEG datasets hold images of many sizes; set [data] image_size "
                     "(the output side, e.g. 224)");
    }
    if (config.train && config.augment == Augment::kCropFlip) {
      HPCTRAIN_THROW(rt::DataError,
                     "transform: crop_flip needs images of one size; JPEG datasets take "
                     "[data] augment = \"random_resized_crop\" (or \"none\")");
    }
  }
  if (config.crop_padding < 0 || config.crop_padding > 1024) {
    HPCTRAIN_THROW(rt::DataError, "transform: crop_padding " + std::to_string(config.crop_padding) +
                                      " outside [0, 1024]");
  }
  if (config.train && config.augment == Augment::kCropFlip &&
      (out_h_ > h_ + 2 * config.crop_padding || out_w_ > w_ + 2 * config.crop_padding)) {
    HPCTRAIN_THROW(rt::DataError, "transform: crop_flip cannot cut " + std::to_string(out_h_) +
                                      "x" + std::to_string(out_w_) + " from " + std::to_string(h_) +
                                      "x" + std::to_string(w_) + " images padded by " +
                                      std::to_string(config.crop_padding) +
                                      "; use random_resized_crop or a smaller image_size");
  }
  if (!(config.min_scale > 0 && config.min_scale <= config.max_scale && config.max_scale <= 1 &&
        config.min_ratio > 0 && config.min_ratio <= config.max_ratio &&
        config.flip_probability >= 0 && config.flip_probability <= 1 &&
        config.center_crop_fraction > 0 && config.center_crop_fraction <= 1)) {
    HPCTRAIN_THROW(rt::DataError,
                   "transform: scale, ratio, flip or crop fraction outside their ranges");
  }
  const bool given = !config.mean.empty() || !config.std.empty();
  if (given && (static_cast<int64_t>(config.mean.size()) != c_ ||
                static_cast<int64_t>(config.std.size()) != c_)) {
    HPCTRAIN_THROW(rt::DataError, "transform: normalisation statistics for " +
                                      std::to_string(config.mean.size()) +
                                      " channels, images have " + std::to_string(c_));
  }
  const std::vector<double>& mean = given ? config.mean : info.mean;
  const std::vector<double>& std = given ? config.std : info.std;
  for (int64_t ch = 0; ch < c_; ++ch) {
    if (!(std[ch] > 0)) HPCTRAIN_THROW(rt::DataError, "transform: a channel's std is not positive");
    scale_.push_back(static_cast<float>(1.0 / (255.0 * std[ch])));
    bias_.push_back(static_cast<float>(-mean[ch] / std[ch]));
  }
}

size_t Transform::sample_output_bytes() const {
  const auto elems = static_cast<size_t>(out_h_ * out_w_ * c_);
  return config_.output == OutputType::kFloat32 ? elems * sizeof(float) : elems;
}

void Transform::apply(const uint8_t* src, uint64_t seed, int64_t epoch, int64_t index,
                      void* dst) const {
  SplitMix64 rng(
      derive_key(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index), kAugmentDomain));
  // Decide the geometry first, then run one fused kernel.
  bool flip = false;
  bool resample = false;
  PixelBox box{0, 0, h_, w_};
  int64_t dy = 0, dx = 0;
  const Augment mode = config_.train ? config_.augment : Augment::kNone;
  if (mode == Augment::kCropFlip) {
    const int64_t p = config_.crop_padding;
    dy = rng.between(0, h_ + 2 * p - out_h_) - p;
    dx = rng.between(0, w_ + 2 * p - out_w_) - p;
    flip = rng.uniform() < config_.flip_probability;
  } else if (mode == Augment::kRandomResizedCrop) {
    box = random_resized_crop_box(h_, w_, config_, rng);
    flip = rng.uniform() < config_.flip_probability;
    resample = true;
  } else if (out_h_ != h_ || out_w_ != w_) {
    // Evaluation / no augmentation with a different output size: a centered crop of the shorter
    // side (a fraction of it when downscaling) resized to the output.
    box = center_crop_box(h_, w_, out_h_, out_w_, config_, /*fraction_always=*/false);
    resample = true;
  }

  const int64_t plane = out_h_ * out_w_;
  // Identity geometry into uint8 with the source's interleaving: a plain copy (the common
  // "hand raw pixels to the GPU" case, where per-element stores would dominate the read).
  if (!resample && dy == 0 && dx == 0 && !flip && out_h_ == h_ && out_w_ == w_ &&
      config_.output == OutputType::kUint8 && (config_.layout == Layout::kNHWC || c_ == 1)) {
    std::memcpy(dst, src, static_cast<size_t>(plane * c_));
    return;
  }
  with_sink(dst, [&](const auto& sink) {
    if (resample) {
      resample_kernel(src, w_, c_, whole_pixels(box.top, box.left, box.height, box.width), out_h_,
                      out_w_, flip, sink);
    } else {
      shift_kernel(src, h_, w_, c_, out_h_, out_w_, dy, dx, flip, sink);
    }
  });
}

template <typename Fn>
void Transform::with_sink(void* dst, Fn&& fn) const {
  const int64_t plane = out_h_ * out_w_;
  const bool planar = config_.layout == Layout::kNCHW;
  if (config_.output == OutputType::kFloat32) {
    auto* out = static_cast<float*>(dst);
    if (planar) {
      fn(Sink<float, true>{out, plane, c_, scale_.data(), bias_.data()});
    } else {
      fn(Sink<float, false>{out, plane, c_, scale_.data(), bias_.data()});
    }
  } else {
    auto* out = static_cast<uint8_t*>(dst);
    if (planar) {
      fn(Sink<uint8_t, true>{out, plane, c_, scale_.data(), bias_.data()});
    } else {
      fn(Sink<uint8_t, false>{out, plane, c_, scale_.data(), bias_.data()});
    }
  }
}

void Transform::apply_jpeg(const uint8_t* jpeg, size_t size, uint64_t seed, int64_t epoch,
                           int64_t index, void* dst) const {
  SplitMix64 rng(
      derive_key(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(index), kAugmentDomain));
  const JpegHeader header = read_jpeg_header(jpeg, size);
  if (header.channels != c_) {
    HPCTRAIN_THROW(JpegError, "JPEG: " + std::to_string(header.channels) +
                                  " channels, the dataset's images have " + std::to_string(c_));
  }
  // The geometry on the whole image, as torchvision's transforms see it.
  PixelBox box{0, 0, header.height, header.width};
  bool flip = false;
  const Augment mode = config_.train ? config_.augment : Augment::kNone;
  if (mode == Augment::kRandomResizedCrop) {
    box = random_resized_crop_box(header.height, header.width, config_, rng);
    flip = rng.uniform() < config_.flip_probability;
  } else if (mode == Augment::kCropFlip) {
    HPCTRAIN_THROW(rt::DataError,
                   "transform: crop_flip needs images of one size; JPEG samples take "
                   "random_resized_crop (training) or the center crop (evaluation)");
  } else {
    // torchvision's geometry whatever the image's size: Resize(256) + CenterCrop(224) keeps
    // 224/256 of the shorter side of a small image too.
    box = center_crop_box(header.height, header.width, out_h_, out_w_, config_,
                          /*fraction_always=*/true);
  }
  const DecodedRegion r = decode_region(jpeg, size, box, out_h_, out_w_);
  // The box in the decoded pixels, and the pixels that hold it.
  const ResampleBox rb{
      r.top,
      r.left,
      r.height,
      r.width,
      std::clamp<int64_t>(static_cast<int64_t>(std::floor(r.top)), 0, r.rows - 1),
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(r.top + r.height)) - 1, 0, r.rows - 1),
      std::clamp<int64_t>(static_cast<int64_t>(std::floor(r.left)), 0, r.cols - 1),
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(r.left + r.width)) - 1, 0, r.cols - 1)};
  with_sink(dst, [&](const auto& sink) {
    resample_kernel(r.pixels.data(), r.cols, c_, rb, out_h_, out_w_, flip, sink);
  });
}

}  // namespace hpctrain::data
