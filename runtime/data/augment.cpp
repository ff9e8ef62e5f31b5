#include "data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/error.hpp"
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
      *p = static_cast<uint8_t>(std::lround(std::clamp(v, 0.0f, 255.0f)));
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

// Bilinear taps (align_corners=False, clamped to the box) for resizing `len` source pixels from
// `offset` to `out` pixels.
void taps(int64_t offset, int64_t len, int64_t out, bool flip, std::vector<Tap>& t) {
  t.resize(static_cast<size_t>(out));
  const double step = static_cast<double>(len) / static_cast<double>(out);
  for (int64_t o = 0; o < out; ++o) {
    double s = (static_cast<double>(o) + 0.5) * step - 0.5;
    s = std::clamp(s, 0.0, static_cast<double>(len - 1));
    const auto i0 = static_cast<int64_t>(s);
    const int64_t i1 = std::min(i0 + 1, len - 1);
    const int64_t slot = flip ? out - 1 - o : o;
    t[static_cast<size_t>(slot)] = {offset + i0, offset + i1,
                                    static_cast<float>(s - static_cast<double>(i0))};
  }
}

template <typename SinkT>
void resample_kernel(const uint8_t* src, int64_t w, int64_t c, int64_t top, int64_t left,
                     int64_t box_h, int64_t box_w, int64_t out_h, int64_t out_w, bool flip,
                     const SinkT& sink) {
  thread_local std::vector<Tap> xt, yt;
  taps(left, box_w, out_w, flip, xt);
  taps(top, box_h, out_h, /*flip=*/false, yt);
  for (int64_t y = 0; y < out_h; ++y) {
    const Tap ty = yt[static_cast<size_t>(y)];
    const uint8_t* r0 = src + ty.i0 * w * c;
    const uint8_t* r1 = src + ty.i1 * w * c;
    for (int64_t x = 0; x < out_w; ++x) {
      const Tap tx = xt[static_cast<size_t>(x)];
      const int64_t pixel = y * out_w + x;
      for (int64_t ch = 0; ch < c; ++ch) {
        const float a = r0[tx.i0 * c + ch] + tx.f * (r0[tx.i1 * c + ch] - r0[tx.i0 * c + ch]);
        const float b = r1[tx.i0 * c + ch] + tx.f * (r1[tx.i1 * c + ch] - r1[tx.i0 * c + ch]);
        sink.put(pixel, ch, a + ty.f * (b - a));
      }
    }
  }
}

}  // namespace

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
  for (int64_t ch = 0; ch < c_; ++ch) {
    scale_.push_back(static_cast<float>(1.0 / (255.0 * info.std[ch])));
    bias_.push_back(static_cast<float>(-info.mean[ch] / info.std[ch]));
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
  Box box{0, 0, h_, w_};
  int64_t dy = 0, dx = 0;
  const Augment mode = config_.train ? config_.augment : Augment::kNone;
  if (mode == Augment::kCropFlip) {
    const int64_t p = config_.crop_padding;
    dy = rng.between(0, h_ + 2 * p - out_h_) - p;
    dx = rng.between(0, w_ + 2 * p - out_w_) - p;
    flip = rng.uniform() < config_.flip_probability;
  } else if (mode == Augment::kRandomResizedCrop) {
    // torchvision's RandomResizedCrop.get_params: 10 tries at a random area and log-uniform
    // aspect ratio, then a center crop clamped to the ratio range.
    const double area = static_cast<double>(h_ * w_);
    const double log_lo = std::log(config_.min_ratio), log_hi = std::log(config_.max_ratio);
    bool found = false;
    for (int attempt = 0; attempt < 10 && !found; ++attempt) {
      const double target = area * rng.uniform(config_.min_scale, config_.max_scale);
      const double ratio = std::exp(rng.uniform(log_lo, log_hi));
      const auto cw = static_cast<int64_t>(std::lround(std::sqrt(target * ratio)));
      const auto ch = static_cast<int64_t>(std::lround(std::sqrt(target / ratio)));
      if (cw > 0 && cw <= w_ && ch > 0 && ch <= h_) {
        box = {rng.between(0, h_ - ch), rng.between(0, w_ - cw), ch, cw};
        found = true;
      }
    }
    if (!found) {
      const double in_ratio = static_cast<double>(w_) / static_cast<double>(h_);
      int64_t cw = w_, ch = h_;
      if (in_ratio < config_.min_ratio) {
        ch = std::lround(static_cast<double>(w_) / config_.min_ratio);
      } else if (in_ratio > config_.max_ratio) {
        cw = std::lround(static_cast<double>(h_) * config_.max_ratio);
      }
      box = {(h_ - ch) / 2, (w_ - cw) / 2, ch, cw};
    }
    flip = rng.uniform() < config_.flip_probability;
    resample = true;
  } else if (out_h_ != h_ || out_w_ != w_) {
    // Evaluation / no augmentation with a different output size: a centered crop of the shorter
    // side (a fraction of it when downscaling) resized to the output.
    const int64_t side = std::min(h_, w_);
    const bool downscale = side > std::max(out_h_, out_w_);
    const auto crop = downscale ? std::max<int64_t>(1, std::lround(static_cast<double>(side) *
                                                                   config_.center_crop_fraction))
                                : side;
    box = {(h_ - crop) / 2, (w_ - crop) / 2, crop, crop};
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
  auto run = [&](const auto& sink) {
    if (resample) {
      resample_kernel(src, w_, c_, box.top, box.left, box.height, box.width, out_h_, out_w_, flip,
                      sink);
    } else {
      shift_kernel(src, h_, w_, c_, out_h_, out_w_, dy, dx, flip, sink);
    }
  };
  const bool planar = config_.layout == Layout::kNCHW;
  if (config_.output == OutputType::kFloat32) {
    auto* out = static_cast<float*>(dst);
    if (planar) {
      run(Sink<float, true>{out, plane, c_, scale_.data(), bias_.data()});
    } else {
      run(Sink<float, false>{out, plane, c_, scale_.data(), bias_.data()});
    }
  } else {
    auto* out = static_cast<uint8_t*>(dst);
    if (planar) {
      run(Sink<uint8_t, true>{out, plane, c_, scale_.data(), bias_.data()});
    } else {
      run(Sink<uint8_t, false>{out, plane, c_, scale_.data(), bias_.data()});
    }
  }
}

}  // namespace hpctrain::data
