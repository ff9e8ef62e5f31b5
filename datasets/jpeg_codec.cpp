#include "jpeg_codec.hpp"

#include <csetjmp>
#include <cstdio>

// jpeglib.h needs size_t and FILE declared first: its own block, after them.
#include <jpeglib.h>

#include <cstdlib>
#include <string>

#include "data/jpeg.hpp"
#include "data/jpeg_error.hpp"

namespace hpctrain::datasets {
namespace {

// Each function's libjpeg calls sit between its setjmp and the end of the function, with no
// C++ object constructed in between (the longjmp would skip its destructor).
bool decode_into(jpeg_decompress_struct& c, data::JpegErrorManager& err, const uint8_t* data,
                 size_t size, std::vector<uint8_t>& raw, int& components) {
  if (setjmp(err.jump)) return false;
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, data, static_cast<unsigned long>(size));
  jpeg_read_header(&c, TRUE);
  if (c.num_components == 4) {
    c.out_color_space = JCS_CMYK;  // YCCK becomes CMYK in libjpeg; RGB below
  } else if (c.num_components == 1) {
    c.out_color_space = JCS_GRAYSCALE;
  } else {
    c.out_color_space = JCS_RGB;
  }
  // Bounded before anything is allocated: a header may claim 65535 x 65535.
  if (c.image_width < 1 || c.image_height < 1 || c.image_width > 16384 || c.image_height > 16384) {
    std::snprintf(err.message, sizeof err.message, "image size %ux%u outside 1..16384",
                  c.image_width, c.image_height);
    return false;
  }
  jpeg_start_decompress(&c);
  components = c.output_components;
  const size_t stride = static_cast<size_t>(c.output_width) * static_cast<size_t>(components);
  raw.resize(stride * c.output_height);
  while (c.output_scanline < c.output_height) {
    JSAMPROW row = raw.data() + static_cast<size_t>(c.output_scanline) * stride;
    jpeg_read_scanlines(&c, &row, 1);
  }
  jpeg_finish_decompress(&c);
  return true;
}

bool encode_into(jpeg_compress_struct& c, data::JpegErrorManager& err, const uint8_t* rgb,
                 int64_t height, int64_t width, int quality, unsigned char** out,
                 unsigned long* out_size) {
  if (setjmp(err.jump)) return false;
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, out, out_size);
  c.image_width = static_cast<JDIMENSION>(width);
  c.image_height = static_cast<JDIMENSION>(height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);  // YCbCr 4:2:0
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  const size_t stride = static_cast<size_t>(width) * 3;
  while (c.next_scanline < c.image_height) {
    auto row = const_cast<JSAMPROW>(rgb + static_cast<size_t>(c.next_scanline) * stride);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  return true;
}

}  // namespace

RgbImage decode_jpeg_rgb(const uint8_t* data, size_t size) {
  std::vector<uint8_t> raw;
  jpeg_decompress_struct c{};
  data::JpegErrorManager err{};
  data::install_jpeg_errors(err, c.err);
  int components = 0;
  const bool ok = decode_into(c, err, data, size, raw, components);
  const auto height = static_cast<int64_t>(c.output_height);
  const auto width = static_cast<int64_t>(c.output_width);
  jpeg_destroy_decompress(&c);
  if (!ok) {
    HPCTRAIN_THROW(data::JpegError, std::string("JPEG: ") +
                                        (err.message[0] != '\0' ? err.message : "cannot decode"));
  }
  RgbImage out;
  out.height = height;
  out.width = width;
  out.pixels.resize(static_cast<size_t>(out.height * out.width) * 3);
  const size_t n = static_cast<size_t>(out.height * out.width);
  for (size_t p = 0; p < n; ++p) {
    uint8_t* dst = out.pixels.data() + 3 * p;
    if (components == 1) {
      dst[0] = dst[1] = dst[2] = raw[p];
    } else if (components == 3) {
      dst[0] = raw[3 * p];
      dst[1] = raw[3 * p + 1];
      dst[2] = raw[3 * p + 2];
    } else {
      // Adobe's inverted CMYK (what Photoshop writes, and ImageNet's CMYK files are).
      const unsigned k = raw[4 * p + 3];
      for (int ch = 0; ch < 3; ++ch) dst[ch] = static_cast<uint8_t>(raw[4 * p + ch] * k / 255);
    }
  }
  return out;
}

std::vector<uint8_t> encode_jpeg_rgb(const uint8_t* rgb, int64_t height, int64_t width,
                                     int quality) {
  jpeg_compress_struct c{};
  data::JpegErrorManager err{};
  data::install_jpeg_errors(err, c.err);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  const bool ok = encode_into(c, err, rgb, height, width, quality, &out, &out_size);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> bytes;
  if (ok) bytes.assign(out, out + out_size);
  std::free(out);
  if (!ok) HPCTRAIN_THROW(data::JpegError, std::string("JPEG encoder: ") + err.message);
  return bytes;
}

}  // namespace hpctrain::datasets
