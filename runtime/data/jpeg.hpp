// JPEG samples: decoding with libjpeg-turbo (Debian's libjpeg62-turbo) that reads only what a crop
// needs. A training crop of a 500x375 image resized to 224 rarely needs every pixel at full
// resolution: the decoder scales in the DCT by n/8 (the smallest n that keeps the crop at least as
// large as the output), decodes only the crop's rows (jpeg_skip_scanlines) and the iMCU columns
// that hold it (jpeg_crop_scanline), and hands the region to the resampler (data/augment.hpp).
// Errors never abort the process: libjpeg's error exit becomes a JpegError (a DataError) naming
// what libjpeg said; a warning (corrupt data libjpeg would paper over) is an error too.
// Thread safety: the functions are reentrant; each call uses its own decompressor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/error.hpp"

namespace hpctrain::data {

// A JPEG that libjpeg refuses or complains about. The caller adds the file and sample index.
class JpegError : public rt::DataError {
 public:
  using rt::DataError::DataError;
};

struct JpegHeader {
  int64_t width = 0, height = 0;
  int64_t channels = 0;  // 1 (grayscale) or 3 (decoded as RGB)
};

// Reads the header only. Throws JpegError.
JpegHeader read_jpeg_header(const uint8_t* data, size_t size);

// A rectangle of the full-resolution image.
struct PixelBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

// What decode_region produced: `pixels` holds rows x cols x channels (uint8, interleaved); the
// requested box, in those pixels' coordinates, is `box` (sub-pixel: the DCT scale need not divide
// the box's edges), to resample from.
struct DecodedRegion {
  std::vector<uint8_t> pixels;
  int64_t rows = 0, cols = 0, channels = 0;
  int scale_eighths = 8;                            // the DCT scale used: scale_eighths / 8
  double top = 0, left = 0, height = 0, width = 0;  // the requested box, scaled
};

// Decodes the part of the image that holds `box` (clamped to the image), scaled by the smallest
// n/8 (n in 1..8) that keeps the box at least out_height x out_width; n = 8 (no scaling) when
// `allow_scaling` is false or the box is smaller than the output. Throws JpegError.
DecodedRegion decode_region(const uint8_t* data, size_t size, const PixelBox& box,
                            int64_t out_height, int64_t out_width, bool allow_scaling = true);

}  // namespace hpctrain::data
