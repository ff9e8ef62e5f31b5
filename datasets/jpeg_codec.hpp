// The converter's JPEG encoder and its any-JPEG decoder (libjpeg-turbo): what `hpctrain-data
// folder --jpeg` needs beyond the training decoder (data/jpeg.hpp) to re-encode an image that is
// not kept as stored: grayscale, CMYK/YCCK (Adobe, inverted), or larger than --max-side.
// Errors (and libjpeg's warnings) are data::JpegError. Thread safety: reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpctrain::datasets {

struct RgbImage {
  std::vector<uint8_t> pixels;  // height x width x 3
  int64_t height = 0, width = 0;
};

// Decodes any baseline or progressive JPEG libjpeg reads (1, 3 or 4 components) to RGB.
RgbImage decode_jpeg_rgb(const uint8_t* data, size_t size);

// Encodes height x width x 3 RGB at `quality` (1..100), 4:2:0 chroma subsampling, as PIL and
// torchvision's ImageNet copies are.
std::vector<uint8_t> encode_jpeg_rgb(const uint8_t* rgb, int64_t height, int64_t width,
                                     int quality);

}  // namespace hpctrain::datasets
