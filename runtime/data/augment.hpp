// Per-sample transforms: the training augmentations (random crop with zero padding + horizontal
// flip, or random resized crop + flip), the deterministic evaluation path (center crop/resize),
// normalisation with the dataset's mean/std, and the output layout (NCHW or channels_last) and
// type (float32 normalised, or uint8 for normalising on the GPU), fused into one pass per sample.
//
// Every random choice for a sample comes from SplitMix64(derive_key(seed, epoch, index)), so a
// sample's output is a pure function of (seed, epoch, global sample index): independent of the
// thread that computes it and the same after a resume.
// Thread safety: a Transform is immutable after construction; apply() may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "data/format.hpp"
#include "data/jpeg.hpp"
#include "spec/choices.hpp"

namespace hpctrain::data {

// The spec's enumeration ([data] augment; spec/choices.hpp holds the names).
using Augment = spec::Augment;
enum class Layout { kNCHW, kNHWC };
enum class OutputType { kFloat32, kUint8 };

struct TransformConfig {
  Augment augment = Augment::kNone;
  bool train = true;         // false: the evaluation path, whatever `augment` says
  int64_t crop_padding = 0;  // kCropFlip
  int64_t image_size = 0;    // output side; 0: the dataset's own height x width
  Layout layout = Layout::kNCHW;
  OutputType output = OutputType::kFloat32;
  // kRandomResizedCrop, torchvision's defaults.
  double min_scale = 0.08, max_scale = 1.0;
  double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
  double flip_probability = 0.5;
  // The evaluation path crops this fraction of the shorter side before resizing when the image is
  // larger than the output (torchvision's Resize(256) + CenterCrop(224) is 224/256 = 0.875).
  double center_crop_fraction = 0.875;
  // Normalisation statistics per channel on the [0, 1] scale; empty: the dataset's own. The
  // validation loader takes the training set's, so both sets are normalised alike.
  std::vector<double> mean, std;
};

class SplitMix64;

// torchvision's RandomResizedCrop.get_params on an h x w image: 10 tries at a random area (scale)
// and log-uniform aspect ratio, then a center crop clamped to the ratio range.
PixelBox random_resized_crop_box(int64_t h, int64_t w, const TransformConfig& config,
                                 SplitMix64& rng);
// The evaluation crop: a centered square of the shorter side, center_crop_fraction of it when the
// image is larger than the output or `fraction_always` (torchvision's Resize(256) +
// CenterCrop(224), which the JPEG path follows for every image; the raw path keeps a small
// image's whole shorter side). The offsets are torchvision's center_crop's, int(round((h - crop) /
// 2.0)) with Python's halves to even (a difference of 3 starts at 2, of 7 at 4), so the box is
// torchvision's CenterCrop exactly wherever no resize comes first (docs/dataset-format.md says
// where a Resize + CenterCrop can only be approximated).
PixelBox center_crop_box(int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                         const TransformConfig& config, bool fraction_always);

class Transform {
 public:
  // Throws rt::DataError when the config cannot apply to images of `info`'s shape.
  Transform(const TransformConfig& config, const DatasetInfo& info);

  int64_t out_height() const { return out_h_; }
  int64_t out_width() const { return out_w_; }
  int64_t channels() const { return c_; }
  size_t sample_output_bytes() const;
  // Per channel, v * scale + bias == (v / 255 - mean) / std: what a float output holds for a
  // pixel value v, and what the device applies to a uint8 output (train/device_input.hpp).
  const std::vector<float>& normalise_scale() const { return scale_; }
  const std::vector<float>& normalise_bias() const { return bias_; }

  // src: one H x W x C uint8 image; dst: sample_output_bytes() bytes in the configured layout.
  void apply(const uint8_t* src, uint64_t seed, int64_t epoch, int64_t index, void* dst) const;
  // The same for one JPEG sample of any size (data/jpeg.hpp): random_resized_crop (training) or
  // the center crop (evaluation) chosen on the whole image, only the region it needs decoded,
  // scaled in the DCT where the output allows. The output size must be set (image_size). Throws
  // JpegError for a damaged JPEG or one with other channels than the dataset's.
  void apply_jpeg(const uint8_t* jpeg, size_t size, uint64_t seed, int64_t epoch, int64_t index,
                  void* dst) const;

 private:
  // Calls fn(sink) with the sink writing dst in the configured layout and type.
  template <typename Fn>
  void with_sink(void* dst, Fn&& fn) const;

  TransformConfig config_;
  int64_t h_, w_, c_, out_h_, out_w_;
  std::vector<float> scale_, bias_;  // normalisation: v * scale + bias == (v/255 - mean) / std
};

}  // namespace hpctrain::data
