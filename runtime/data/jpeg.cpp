#include "data/jpeg.hpp"

#include <csetjmp>
#include <cstddef>
#include <cstdio>

// jpeglib.h needs size_t and FILE declared first: its own block, after them.
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "data/format.hpp"
#include "data/jpeg_error.hpp"

namespace hpctrain::data {
namespace {

// A decompressor whose errors come back as `message`; destroyed on every path.
class Decompressor {
 public:
  Decompressor() { install_jpeg_errors(err_, cinfo_.err); }
  ~Decompressor() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  jpeg_decompress_struct& cinfo() { return cinfo_; }
  JpegErrorManager& err() { return err_; }
  void mark_created() { created_ = true; }

  [[noreturn]] void fail() const {
    HPCTRAIN_THROW(JpegError, std::string("JPEG: ") + err_.message);
  }

 private:
  jpeg_decompress_struct cinfo_{};
  JpegErrorManager err_{};
  bool created_ = false;
};

// setjmp may not be called in a context whose state the longjmp would skip destructors of, so
// the libjpeg calls live in these plain functions, each with its own setjmp, returning false on
// an error.
bool start(Decompressor& d, const uint8_t* data, size_t size) {
  auto& c = d.cinfo();
  if (setjmp(d.err().jump)) return false;
  jpeg_create_decompress(&c);
  d.mark_created();
  jpeg_mem_src(&c, data, static_cast<unsigned long>(size));
  jpeg_read_header(&c, TRUE);
  return true;
}

bool start_decompress(Decompressor& d, unsigned scale_num, JDIMENSION* xoffset, JDIMENSION* width) {
  auto& c = d.cinfo();
  if (setjmp(d.err().jump)) return false;
  c.scale_num = scale_num;
  c.scale_denom = 8;
  c.dct_method = JDCT_ISLOW;
  c.out_color_space = c.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&c);
  if (c.progressive_mode && c.do_block_smoothing) {
    // A progressive file whose scans leave coefficients incomplete (a DC-only script, no
    // refinement scans) is smoothed: each block's low frequencies estimated from the DC of the
    // blocks up to 2 away. libjpeg-turbo (2.1.5, still in 3.2) takes the first block column of a
    // crop for the image's left edge, so the blocks of its first two columns (and, through
    // chroma upsampling, the pixel after them) differ from a full decode (found by tests/fuzz;
    // reproducer tests/fuzz/crashes/progressive-dc-only-crop). Starting two iMCUs further left
    // keeps them out of the box and its one-column margin: a block column is at most one iMCU
    // wide in the output.
#if JPEG_LIB_VERSION >= 70
    // The 7 and 8 APIs (Ubuntu's libjpeg-turbo8) split the 6.2 API's min_DCT_scaled_size (Debian,
    // RHEL) into h and v; libjpeg-turbo itself reads h in its place (jpegcomp.h), and a column
    // is horizontal.
    const int min_dct_scaled = c.min_DCT_h_scaled_size;
#else
    const int min_dct_scaled = c.min_DCT_scaled_size;
#endif
    const JDIMENSION imcu =
        static_cast<JDIMENSION>(c.max_h_samp_factor) * static_cast<JDIMENSION>(min_dct_scaled);
    const JDIMENSION back = std::min<JDIMENSION>(*xoffset, 2 * imcu);
    *xoffset -= back;
    *width += back;
  }
  if (*width < c.output_width) jpeg_crop_scanline(&c, xoffset, width);
  return true;
}

// Skips to row `first`, reads `count` rows into `out` (row stride `stride`), finishes. libjpeg
// may end early on a truncated file: that raises a warning, hence an error.
bool read_rows(Decompressor& d, JDIMENSION first, JDIMENSION count, uint8_t* out, size_t stride) {
  auto& c = d.cinfo();
  if (setjmp(d.err().jump)) return false;
  if (first > 0) jpeg_skip_scanlines(&c, first);
  for (JDIMENSION r = 0; r < count;) {
    JSAMPROW row = out + static_cast<size_t>(r) * stride;
    const JDIMENSION got = jpeg_read_scanlines(&c, &row, 1);
    if (got == 0) {
      std::snprintf(d.err().message, sizeof d.err().message, "the image data ended at row %u of %u",
                    first + r, c.output_height);
      return false;
    }
    r += got;
  }
  // The rows below the region are not needed: abort rather than decode them.
  jpeg_abort_decompress(&c);
  return true;
}

void check_header(const jpeg_decompress_struct& c) {
  if (c.num_components != 1 && c.num_components != 3) {
    HPCTRAIN_THROW(JpegError, "JPEG: " + std::to_string(c.num_components) +
                                  " components (CMYK/YCCK or other); hpctrain reads grayscale "
                                  "and colour (3-component) JPEGs");
  }
  // Arithmetic-coded data that runs into a marker is filled with zeros without a warning, so a
  // damaged file would train as a partly grey image, and a tiny one can claim 65500^2 pixels that
  // take seconds to decode (found by tests/fuzz). Browsers and cameras do not write them;
  // hpctrain-data folder --jpeg re-encodes them with Huffman coding.
  if (c.arith_code) {
    HPCTRAIN_THROW(JpegError,
                   "JPEG: arithmetic-coded; hpctrain reads Huffman-coded JPEGs (hpctrain-data "
                   "folder --jpeg re-encodes such files)");
  }
  if (c.image_width < 1 || c.image_height < 1 || c.image_width > 65500 || c.image_height > 65500) {
    HPCTRAIN_THROW(JpegError, "JPEG: image size " + std::to_string(c.image_width) + "x" +
                                  std::to_string(c.image_height) + " out of range");
  }
}

}  // namespace

JpegHeader read_jpeg_header(const uint8_t* data, size_t size) {
  Decompressor d;
  if (!start(d, data, size)) d.fail();
  const auto& c = d.cinfo();
  check_header(c);
  return {static_cast<int64_t>(c.image_width), static_cast<int64_t>(c.image_height),
          c.num_components == 1 ? 1 : 3};
}

DecodedRegion decode_region(const uint8_t* data, size_t size, const PixelBox& requested,
                            int64_t out_height, int64_t out_width, bool allow_scaling) {
  Decompressor d;
  if (!start(d, data, size)) d.fail();
  auto& c = d.cinfo();
  check_header(c);
  const auto img_w = static_cast<int64_t>(c.image_width);
  const auto img_h = static_cast<int64_t>(c.image_height);
  PixelBox box = requested;
  box.left = std::clamp<int64_t>(box.left, 0, img_w - 1);
  box.top = std::clamp<int64_t>(box.top, 0, img_h - 1);
  box.width = std::clamp<int64_t>(box.width, 1, img_w - box.left);
  box.height = std::clamp<int64_t>(box.height, 1, img_h - box.top);
  // The smallest n/8 that keeps the box at least the output's size in both directions.
  int n = 8;
  if (allow_scaling) {
    while (n > 1 && box.width * (n - 1) >= out_width * 8 &&
           box.height * (n - 1) >= out_height * 8) {
      --n;
    }
  }
  // libjpeg's scaled size of a length: ceil(len * n / 8).
  const auto scaled = [n](int64_t v) { return (v * n + 7) / 8; };
  const double s = n / 8.0;
  // The rows and columns of the scaled image that hold the box (bilinear taps reach one pixel
  // past a fractional edge).
  const int64_t sw = scaled(img_w), sh = scaled(img_h);
  const int64_t x0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(box.left * s)), 0, sw - 1);
  const int64_t y0 = std::clamp<int64_t>(static_cast<int64_t>(std::floor(box.top * s)), 0, sh - 1);
  const int64_t x1 =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil((box.left + box.width) * s)), x0 + 1, sw);
  const int64_t y1 =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil((box.top + box.height) * s)), y0 + 1, sh);
  // One column more on each side: with subsampled chroma, the decoder's edge columns are
  // upsampled from replicated chroma, not their neighbours' (measured: only the outermost column
  // of a cropped region differs from a full decode), so they must fall outside the box.
  JDIMENSION xoffset = static_cast<JDIMENSION>(std::max<int64_t>(0, x0 - 1));
  JDIMENSION width = static_cast<JDIMENSION>(std::min<int64_t>(sw, x1 + 1) - xoffset);
  if (!start_decompress(d, static_cast<unsigned>(n), &xoffset, &width)) d.fail();
  // jpeg_crop_scanline widened the columns to whole iMCUs: xoffset moved left, width grew.
  DecodedRegion r;
  r.channels = c.output_components;
  r.cols = static_cast<int64_t>(c.output_width);
  r.rows = y1 - y0;
  r.scale_eighths = n;
  // A header can promise 65500 x 65500 pixels in a few hundred bytes (and arithmetic coding or
  // progressive EOB runs can even deliver them). Bound the region as data/format.hpp bounds raw
  // images, before allocating it: such a file is a JpegError, not a std::bad_alloc or gigabytes
  // of zeroed memory (reproducer: tests/fuzz/crashes/huge-header-unscaled).
  if (r.rows * r.cols > kMaxSide * kMaxSide) {
    HPCTRAIN_THROW(JpegError, "JPEG: the region to decode, " + std::to_string(r.rows) + "x" +
                                  std::to_string(r.cols) + " pixels of the " +
                                  std::to_string(img_w) + "x" + std::to_string(img_h) +
                                  " image at scale " + std::to_string(n) +
                                  "/8, is over the limit of " + std::to_string(kMaxSide) + "x" +
                                  std::to_string(kMaxSide));
  }
  r.pixels.resize(static_cast<size_t>(r.rows * r.cols * r.channels));
  if (!read_rows(d, static_cast<JDIMENSION>(y0), static_cast<JDIMENSION>(r.rows), r.pixels.data(),
                 static_cast<size_t>(r.cols * r.channels))) {
    d.fail();
  }
  r.left = box.left * s - static_cast<double>(xoffset);
  r.top = box.top * s - static_cast<double>(y0);
  r.width = box.width * s;
  r.height = box.height * s;
  return r;
}

}  // namespace hpctrain::data
