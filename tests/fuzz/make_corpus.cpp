// Writes jpeg_fuzz's seed corpus: small JPEGs encoded here with libjpeg, each behind the 16
// parameter bytes jpeg_fuzz.cpp reads, covering what the decoder meets (grayscale and colour;
// 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1, 4:1:0 and 2x4 chroma; baseline, progressive, non-interleaved
// and DC-only scans; restart markers; arithmetic coding; RGB, CMYK and YCCK colour spaces; APP and
// COM markers; sizes from 1x1 to 300x200). tests/fuzz/corpus/ holds its output:
//   jpeg_fuzz_corpus DIR
// The files are deterministic for one libjpeg version; regenerate them with this tool, never by
// hand.
#include <cstddef>
#include <cstdio>

// After size_t and FILE, which it needs.
#include <jpeglib.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "data/rng.hpp"

namespace {

using hpctrain::data::SplitMix64;

struct Sampling {
  int h, v;  // luma sampling factors; chroma are 1x1
};
constexpr Sampling k444{1, 1}, k422{2, 1}, k420{2, 2}, k440{1, 2}, k411{4, 1}, k410{4, 2},
    k24{2, 4};

struct Case {
  std::string name;
  int w, h;
  J_COLOR_SPACE in_space;  // JCS_GRAYSCALE, JCS_RGB, JCS_CMYK
  Sampling sampling = k420;
  int quality = 75;
  bool progressive = false;
  bool arithmetic = false;
  bool optimize = false;
  int restart_mcus = 0, restart_rows = 0;
  J_COLOR_SPACE jpeg_space = JCS_UNKNOWN;  // JCS_UNKNOWN: libjpeg's default for in_space
  enum Scans { kDefault, kNonInterleaved, kDcOnly } scans = kDefault;
  bool markers = false;   // EXIF APP1, ICC APP2, a comment
  int gray_sampling = 1;  // grayscale: luma sampling factor (cjpeg -grayscale -sample 2x2)
};

// Smooth gradients with a little texture: small files that still exercise every block.
std::vector<uint8_t> pixels(const Case& c, int components) {
  std::vector<uint8_t> px(static_cast<size_t>(c.w) * c.h * components);
  SplitMix64 rng(static_cast<uint64_t>(c.w * 7919 + c.h));
  for (int y = 0; y < c.h; ++y) {
    for (int x = 0; x < c.w; ++x) {
      for (int k = 0; k < components; ++k) {
        const double v = 128 + 100 * std::sin(0.03 * x + 1.1 * k) * std::cos(0.025 * y - 0.4 * k) +
                         static_cast<double>(rng.below(8));
        px[(static_cast<size_t>(y) * c.w + x) * components + k] =
            static_cast<uint8_t>(std::fmax(0, std::fmin(255, v)));
      }
    }
  }
  return px;
}

std::vector<uint8_t> encode(const Case& c) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);  // errors exit: a corpus that cannot be made is a bug here
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  const int components = c.in_space == JCS_GRAYSCALE ? 1 : c.in_space == JCS_RGB ? 3 : 4;
  cinfo.image_width = static_cast<JDIMENSION>(c.w);
  cinfo.image_height = static_cast<JDIMENSION>(c.h);
  cinfo.input_components = components;
  cinfo.in_color_space = c.in_space;
  jpeg_set_defaults(&cinfo);
  if (c.jpeg_space != JCS_UNKNOWN) jpeg_set_colorspace(&cinfo, c.jpeg_space);
  jpeg_set_quality(&cinfo, c.quality, TRUE);
  if (components == 1) {
    cinfo.comp_info[0].h_samp_factor = c.gray_sampling;
    cinfo.comp_info[0].v_samp_factor = c.gray_sampling;
  } else {
    cinfo.comp_info[0].h_samp_factor = c.sampling.h;
    cinfo.comp_info[0].v_samp_factor = c.sampling.v;
    for (int k = 1; k < cinfo.num_components; ++k) {
      // CMYK/YCCK's K channel is sampled like luma.
      const bool full = k == 3;
      cinfo.comp_info[k].h_samp_factor = full ? c.sampling.h : 1;
      cinfo.comp_info[k].v_samp_factor = full ? c.sampling.v : 1;
    }
  }
  cinfo.arith_code = c.arithmetic ? TRUE : FALSE;
  cinfo.optimize_coding = c.optimize ? TRUE : FALSE;
  cinfo.restart_interval = static_cast<unsigned>(c.restart_mcus);
  cinfo.restart_in_rows = c.restart_rows;
  if (c.progressive) jpeg_simple_progression(&cinfo);
  // Scan scripts libjpeg would not choose itself; static, as libjpeg keeps the pointer.
  static jpeg_scan_info scans[4];
  if (c.scans == Case::kNonInterleaved) {
    for (int k = 0; k < cinfo.num_components; ++k) {
      scans[k] = {1, {k, 0, 0, 0}, 0, 63, 0, 0};
    }
    cinfo.scan_info = scans;
    cinfo.num_scans = cinfo.num_components;
  } else if (c.scans == Case::kDcOnly) {
    // A progressive file with its DC scan only: complete to libjpeg, which smooths the blocks.
    scans[0] = {cinfo.num_components, {0, 1, 2, 3}, 0, 0, 0, 0};
    cinfo.scan_info = scans;
    cinfo.num_scans = 1;
  }
  jpeg_start_compress(&cinfo, TRUE);
  if (c.markers) {
    const char exif[] = "Exif\0\0MM\0*\0\0\0\x08\0\0";  // big-endian TIFF, no entries
    jpeg_write_marker(&cinfo, JPEG_APP0 + 1, reinterpret_cast<const JOCTET*>(exif),
                      sizeof exif - 1);
    const JOCTET icc[64] = {0, 0, 0, 64, 'l', 'c', 'm', 's'};
    jpeg_write_icc_profile(&cinfo, icc, sizeof icc);
    const char comment[] = "hpctrain fuzz seed";
    jpeg_write_marker(&cinfo, JPEG_COM, reinterpret_cast<const JOCTET*>(comment),
                      sizeof comment - 1);
  }
  const auto px = pixels(c, components);
  while (cinfo.next_scanline < cinfo.image_height) {
    auto* row = const_cast<uint8_t*>(px.data() +
                                     static_cast<size_t>(cinfo.next_scanline) * c.w * components);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> bytes(out, out + size);
  std::free(out);
  return bytes;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  const auto add = [&](Case c) { v.push_back(std::move(c)); };
  add({"gray-1x1", 1, 1, JCS_GRAYSCALE});
  add({"gray-8x8", 8, 8, JCS_GRAYSCALE});
  add({"gray-17x13", 17, 13, JCS_GRAYSCALE});
  add({"gray-1x300", 1, 300, JCS_GRAYSCALE});
  add({"gray-300x2", 300, 2, JCS_GRAYSCALE});
  Case c{"gray-300x200-progressive", 300, 200, JCS_GRAYSCALE};
  c.progressive = true;
  c.quality = 30;
  add(c);
  c = {"gray-sampled-2x2-45x37", 45, 37, JCS_GRAYSCALE};
  c.gray_sampling = 2;
  add(c);
  c = {"gray-restart-rows-64x40", 64, 40, JCS_GRAYSCALE};
  c.restart_rows = 1;
  add(c);
  add({"rgb-1x1-420", 1, 1, JCS_RGB});
  add({"rgb-2x2-444", 2, 2, JCS_RGB, k444});
  add({"rgb-16x16-420", 16, 16, JCS_RGB, k420});
  add({"rgb-33x17-422", 33, 17, JCS_RGB, k422});
  add({"rgb-63x65-440", 63, 65, JCS_RGB, k440});
  add({"rgb-97x61-411", 97, 61, JCS_RGB, k411, 50});
  add({"rgb-70x50-410", 70, 50, JCS_RGB, k410, 50});
  add({"rgb-41x90-2x4", 41, 90, JCS_RGB, k24, 50});
  c = {"rgb-300x200-420", 300, 200, JCS_RGB, k420, 7};
  add(c);
  c = {"rgb-200x300-444-progressive", 200, 300, JCS_RGB, k444, 8};
  c.progressive = true;
  add(c);
  c = {"rgb-120x90-420-progressive", 120, 90, JCS_RGB, k420, 50};
  c.progressive = true;
  add(c);
  c = {"rgb-50x40-420-restart-1mcu", 50, 40, JCS_RGB, k420};
  c.restart_mcus = 1;
  add(c);
  c = {"rgb-80x48-422-restart-progressive", 80, 48, JCS_RGB, k422, 50};
  c.restart_mcus = 3;
  c.progressive = true;
  add(c);
  c = {"rgb-64x48-420-arithmetic", 64, 48, JCS_RGB, k420};
  c.arithmetic = true;
  add(c);
  c = {"rgb-64x48-444-arithmetic-progressive", 64, 48, JCS_RGB, k444, 50};
  c.arithmetic = true;
  c.progressive = true;
  add(c);
  c = {"rgb-48x40-420-optimized", 48, 40, JCS_RGB, k420};
  c.optimize = true;
  add(c);
  c = {"rgb-40x30-444-rgb-colorspace", 40, 30, JCS_RGB, k444};
  c.jpeg_space = JCS_RGB;
  add(c);
  c = {"rgb-72x56-420-non-interleaved", 72, 56, JCS_RGB, k420, 50};
  c.scans = Case::kNonInterleaved;
  add(c);
  c = {"rgb-96x64-420-dc-only", 96, 64, JCS_RGB, k420};
  c.progressive = true;
  c.scans = Case::kDcOnly;
  add(c);
  c = {"rgb-24x24-420-markers", 24, 24, JCS_RGB, k420};
  c.markers = true;
  add(c);
  c = {"gray-24x16-markers", 24, 16, JCS_GRAYSCALE};
  c.markers = true;
  add(c);
  add({"rgb-9x7-444-q100", 9, 7, JCS_RGB, k444, 100});
  add({"cmyk-20x12", 20, 12, JCS_CMYK, k444});
  c = {"ycck-20x12", 20, 12, JCS_CMYK, k420};
  c.jpeg_space = JCS_YCCK;
  add(c);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 1;
  }
  const std::string dir = argv[1];
  SplitMix64 rng(2026);
  size_t i = 0;
  for (const Case& c : cases()) {
    const auto jpeg = encode(c);
    // jpeg_fuzz.cpp's parameters: flags cycle through every combination of the low five bits,
    // the rest at random (fractional boxes mostly, so that they fall inside the image).
    uint8_t params[16];
    for (auto& b : params) b = static_cast<uint8_t>(rng.below(256));
    params[0] = static_cast<uint8_t>((i * 7) % 32 | (i % 5 == 4 ? 32 : 0));
    if (i % 3 == 0) params[0] &= static_cast<uint8_t>(~16);
    const std::string path = dir + "/" + c.name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(params), sizeof params);
    out.write(reinterpret_cast<const char*>(jpeg.data()),
              static_cast<std::streamsize>(jpeg.size()));
    if (!out) {
      std::fprintf(stderr, "jpeg_fuzz_corpus: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("%-40s %5zu bytes\n", c.name.c_str(), jpeg.size() + sizeof params);
    ++i;
  }
  return 0;
}
