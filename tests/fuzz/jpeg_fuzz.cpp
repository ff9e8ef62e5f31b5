// libFuzzer entry point for the JPEG path: read_jpeg_header, decode_region (data/jpeg.hpp) and
// Transform::apply_jpeg (data/augment.hpp). The first kParamBytes bytes of an input choose the
// region, the output sizes and the transform; the rest is the JPEG. Built as jpeg_fuzz (libFuzzer,
// clang, -DHPCTRAIN_FUZZ=ON) and as jpeg_fuzz_replay (replay_main.cpp, any compiler), which ctest
// runs on tests/fuzz/corpus and tests/fuzz/crashes, under ASan+UBSan in build-asan.
//
// Only JpegError (DataError from apply_jpeg) may leave the decoder. Anything else, a sanitizer
// report, a hang, or a broken invariant aborts. The invariants, checked against a plain full
// decode with libjpeg (the reference) where the image is small enough:
//  - decode_region's box lies inside the pixels it returns, and the pixels the resampler reads
//    are the reference's at the same DCT scale (the crop and skip arithmetic is right);
//  - a JPEG the reference decodes is not refused by decode_region or apply_jpeg;
//  - apply_jpeg where no DCT scaling applies equals apply() on the reference (the raw path);
//  - apply_jpeg refuses a JPEG of the other channel count; float outputs are finite.
// Thread safety: single-threaded, as libFuzzer calls it.
#include <csetjmp>
#include <cstddef>
#include <cstdio>

// After size_t and FILE, which it needs.
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "../unit/data/dataset_info.hpp"
#include "common/error.hpp"
#include "data/augment.hpp"
#include "data/format.hpp"
#include "data/jpeg.hpp"

namespace {

using hpctrain::data::Augment;
using hpctrain::data::DatasetInfo;
using hpctrain::data::decode_region;
using hpctrain::data::DecodedRegion;
using hpctrain::data::JpegError;
using hpctrain::data::JpegHeader;
using hpctrain::data::Layout;
using hpctrain::data::OutputType;
using hpctrain::data::PixelBox;
using hpctrain::data::read_jpeg_header;
using hpctrain::data::Transform;
using hpctrain::data::TransformConfig;
using hpctrain::data::testing::info_of;

constexpr size_t kParamBytes = 16;
// Images larger than this (full-resolution pixels) skip the reference checks: a full decode of a
// 65500 x 65500 header would cost more than the fuzzer gains from it.
constexpr int64_t kMaxReferencePixels = int64_t{1} << 22;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "jpeg_fuzz: invariant broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// What the parameter bytes choose.
//   0      flags: 1 allow_scaling, 2 train, 4 NHWC, 8 uint8 output, 16 raw box, 32 augment none
//   1, 2   decode_region's output height, width - 1 (1..256)
//   3      the transform's image_size - 1 (1..256)
//   4..11  the box, four little-endian uint16: top, left, height, width; raw: int16 pixels
//          (negative and past the image too), otherwise fractions of the image (never empty)
//   12, 13 seed; 14 epoch; 15 sample index
struct Params {
  bool allow_scaling, train, nhwc, uint8_output, raw_box, augment_none;
  int64_t out_h, out_w, image_size;
  uint16_t box[4];
  uint64_t seed;
  int64_t epoch, index;
};

Params parse(const uint8_t* p) {
  Params r{};
  r.allow_scaling = (p[0] & 1) != 0;
  r.train = (p[0] & 2) != 0;
  r.nhwc = (p[0] & 4) != 0;
  r.uint8_output = (p[0] & 8) != 0;
  r.raw_box = (p[0] & 16) != 0;
  r.augment_none = (p[0] & 32) != 0;
  r.out_h = int64_t{p[1]} + 1;
  r.out_w = int64_t{p[2]} + 1;
  r.image_size = int64_t{p[3]} + 1;
  for (int i = 0; i < 4; ++i) {
    r.box[i] = static_cast<uint16_t>(p[4 + 2 * i] | (p[5 + 2 * i] << 8));
  }
  r.seed = static_cast<uint64_t>(p[12] | (p[13] << 8));
  r.epoch = p[14];
  r.index = p[15];
  return r;
}

PixelBox box_of(const Params& p, const JpegHeader& h) {
  if (p.raw_box) {
    const auto s = [&](int i) { return static_cast<int64_t>(static_cast<int16_t>(p.box[i])); };
    return {s(0), s(1), s(2), s(3)};
  }
  const auto frac = [&](int i, int64_t side) { return int64_t{p.box[i]} * side / 65536; };
  return {frac(0, h.height), frac(1, h.width), 1 + frac(2, h.height), 1 + frac(3, h.width)};
}

// The reference: libjpeg's full decode at scale n/8 with the same settings as data/jpeg.cpp
// (ISLOW IDCT, RGB or grayscale out, warnings are errors), written independently of it.
struct RefErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

extern "C" void ref_error_exit(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<RefErrorManager*>(cinfo->err)->jump, 1);
}
extern "C" void ref_emit_message(j_common_ptr cinfo, int level) {
  if (level < 0) ref_error_exit(cinfo);
}
extern "C" void ref_output_message(j_common_ptr) {}

struct Image {
  int64_t rows = 0, cols = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

class RefDecoder {
 public:
  RefDecoder() {
    cinfo_.err = jpeg_std_error(&err_.pub);
    err_.pub.error_exit = ref_error_exit;
    err_.pub.emit_message = ref_emit_message;
    err_.pub.output_message = ref_output_message;
  }
  ~RefDecoder() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  RefDecoder(const RefDecoder&) = delete;
  RefDecoder& operator=(const RefDecoder&) = delete;

  // setjmp in functions that hold no C++ object a longjmp would skip.
  bool start(const uint8_t* data, size_t size, int n) {
    if (setjmp(err_.jump)) return false;
    jpeg_create_decompress(&cinfo_);
    created_ = true;
    jpeg_mem_src(&cinfo_, data, static_cast<unsigned long>(size));
    jpeg_read_header(&cinfo_, TRUE);
    if (cinfo_.num_components != 1 && cinfo_.num_components != 3) return false;
    if (static_cast<int64_t>(cinfo_.image_width) * cinfo_.image_height > kMaxReferencePixels) {
      return false;
    }
    cinfo_.scale_num = static_cast<unsigned>(n);
    cinfo_.scale_denom = 8;
    cinfo_.dct_method = JDCT_ISLOW;
    cinfo_.out_color_space = cinfo_.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&cinfo_);
    return true;
  }
  bool read(uint8_t* out, size_t stride) {
    if (setjmp(err_.jump)) return false;
    while (cinfo_.output_scanline < cinfo_.output_height) {
      JSAMPROW row = out + static_cast<size_t>(cinfo_.output_scanline) * stride;
      if (jpeg_read_scanlines(&cinfo_, &row, 1) == 0) return false;
    }
    jpeg_finish_decompress(&cinfo_);
    return true;
  }
  const jpeg_decompress_struct& cinfo() const { return cinfo_; }

 private:
  jpeg_decompress_struct cinfo_{};
  RefErrorManager err_{};
  bool created_ = false;
};

std::optional<Image> reference(const uint8_t* data, size_t size, int n) {
  RefDecoder d;
  if (!d.start(data, size, n)) return std::nullopt;
  Image im;
  im.rows = d.cinfo().output_height;
  im.cols = d.cinfo().output_width;
  im.channels = d.cinfo().output_components;
  im.pixels.resize(static_cast<size_t>(im.rows * im.cols * im.channels));
  if (!d.read(im.pixels.data(), static_cast<size_t>(im.cols * im.channels))) return std::nullopt;
  return im;
}

std::string box_text(const PixelBox& b) {
  return std::to_string(b.top) + "," + std::to_string(b.left) + " " + std::to_string(b.height) +
         "x" + std::to_string(b.width);
}

// decode_region's own contract, and its pixels against the reference at its scale.
void check_region(const uint8_t* jpeg, size_t size, const JpegHeader& h, const PixelBox& requested,
                  const Params& p, const DecodedRegion& r) {
  const std::string where = "decode_region box " + box_text(requested) + " out " +
                            std::to_string(p.out_h) + "x" + std::to_string(p.out_w);
  if (r.channels != h.channels) fail(where + ": channels differ from the header's");
  if (r.scale_eighths < 1 || r.scale_eighths > 8 || (!p.allow_scaling && r.scale_eighths != 8)) {
    fail(where + ": scale " + std::to_string(r.scale_eighths) + "/8");
  }
  if (r.rows < 1 || r.cols < 1 ||
      r.pixels.size() != static_cast<size_t>(r.rows * r.cols * r.channels)) {
    fail(where + ": pixels do not match rows x cols x channels");
  }
  constexpr double kEps = 1e-9;
  if (!(r.width > 0 && r.height > 0 && r.left >= 0 && r.top >= 0 &&
        r.left + r.width <= static_cast<double>(r.cols) + kEps &&
        r.top + r.height <= static_cast<double>(r.rows) + kEps)) {
    fail(where + ": box " + std::to_string(r.top) + "," + std::to_string(r.left) + " " +
         std::to_string(r.height) + "x" + std::to_string(r.width) + " outside the " +
         std::to_string(r.rows) + "x" + std::to_string(r.cols) + " pixels");
  }
  if (h.width * h.height > kMaxReferencePixels) return;
  const auto ref = reference(jpeg, size, r.scale_eighths);
  if (!ref) return;  // the region path stops below the box; the rest may be damaged
  // Where the region starts in the scaled image, as decode_region clamps the box.
  const double s = r.scale_eighths / 8.0;
  const int64_t left = std::clamp<int64_t>(requested.left, 0, h.width - 1);
  const int64_t top = std::clamp<int64_t>(requested.top, 0, h.height - 1);
  const double x0 = static_cast<double>(left) * s - r.left;
  const double y0 = static_cast<double>(top) * s - r.top;
  const auto xoff = static_cast<int64_t>(std::llround(x0));
  const auto yoff = static_cast<int64_t>(std::llround(y0));
  if (std::abs(x0 - static_cast<double>(xoff)) > kEps ||
      std::abs(y0 - static_cast<double>(yoff)) > kEps || xoff < 0 || yoff < 0 ||
      xoff + r.cols > ref->cols || yoff + r.rows > ref->rows) {
    fail(where + ": region at " + std::to_string(y0) + "," + std::to_string(x0) + " size " +
         std::to_string(r.rows) + "x" + std::to_string(r.cols) + " is not inside the " +
         std::to_string(ref->rows) + "x" + std::to_string(ref->cols) + " image at scale " +
         std::to_string(r.scale_eighths) + "/8");
  }
  // The pixels the resampler reads (as Transform::apply_jpeg bounds its taps).
  const auto lo = [](double v, int64_t n) {
    return std::clamp<int64_t>(static_cast<int64_t>(std::floor(v)), 0, n - 1);
  };
  const auto hi = [](double v, int64_t n) {
    return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(v)) - 1, 0, n - 1);
  };
  const int64_t c = r.channels;
  for (int64_t y = lo(r.top, r.rows); y <= hi(r.top + r.height, r.rows); ++y) {
    for (int64_t x = lo(r.left, r.cols); x <= hi(r.left + r.width, r.cols); ++x) {
      const uint8_t* a = &r.pixels[static_cast<size_t>((y * r.cols + x) * c)];
      const uint8_t* b = &ref->pixels[static_cast<size_t>(((yoff + y) * ref->cols + xoff + x) * c)];
      if (std::memcmp(a, b, static_cast<size_t>(c)) != 0) {
        fail(where + ": pixel " + std::to_string(y) + "," + std::to_string(x) +
             " of the region differs from the full decode's " + std::to_string(yoff + y) + "," +
             std::to_string(xoff + x) + " at scale " + std::to_string(r.scale_eighths) + "/8");
      }
    }
  }
}

void check_finite(const Transform& t, const std::vector<uint8_t>& out, const std::string& where) {
  if (t.sample_output_bytes() != out.size()) fail(where + ": output size");
  for (size_t i = 0; i + sizeof(float) <= out.size(); i += sizeof(float)) {
    float v;
    std::memcpy(&v, &out[i], sizeof v);
    if (!std::isfinite(v)) fail(where + ": a float output is not finite");
  }
}

void fuzz_one(const uint8_t* data, size_t size) {
  if (size < kParamBytes) return;
  const Params p = parse(data);
  const uint8_t* jpeg = data + kParamBytes;
  const size_t jpeg_size = size - kParamBytes;

  std::optional<JpegHeader> header;
  try {
    header = read_jpeg_header(jpeg, jpeg_size);
    if (header->width < 1 || header->height < 1 ||
        (header->channels != 1 && header->channels != 3)) {
      fail("read_jpeg_header returned " + std::to_string(header->width) + "x" +
           std::to_string(header->height) + "x" + std::to_string(header->channels));
    }
  } catch (const JpegError&) {
  }
  if (!header) {
    // A header libjpeg refuses cannot decode either.
    try {
      decode_region(jpeg, jpeg_size, {0, 0, 1, 1}, 1, 1, p.allow_scaling);
      fail("decode_region decoded a JPEG whose header read_jpeg_header refused");
    } catch (const JpegError&) {
    }
    return;
  }
  const bool small = header->width * header->height <= kMaxReferencePixels;
  // The full-resolution reference: whether the file decodes at all, and the raw path's input.
  const std::optional<Image> full = small ? reference(jpeg, jpeg_size, 8) : std::nullopt;

  const PixelBox box = box_of(p, *header);
  try {
    const DecodedRegion r = decode_region(jpeg, jpeg_size, box, p.out_h, p.out_w, p.allow_scaling);
    check_region(jpeg, jpeg_size, *header, box, p, r);
  } catch (const JpegError& e) {
    if (full) fail("decode_region refused a JPEG that decodes in full: " + std::string(e.what()));
  }

  TransformConfig cfg;
  cfg.augment = p.augment_none ? Augment::kNone : Augment::kRandomResizedCrop;
  cfg.train = p.train;
  cfg.image_size = p.image_size;
  cfg.layout = p.nhwc ? Layout::kNHWC : Layout::kNCHW;
  cfg.output = p.uint8_output ? OutputType::kUint8 : OutputType::kFloat32;
  for (const int64_t c : {int64_t{3}, int64_t{1}}) {
    // The dataset's nominal size does not matter to the JPEG path: it takes each file's own.
    const Transform t(cfg, info_of(p.image_size, p.image_size, c));
    std::vector<uint8_t> out(t.sample_output_bytes());
    const std::string where = "apply_jpeg (" + std::to_string(c) + " channels, image_size " +
                              std::to_string(p.image_size) + (p.train ? ", train" : ", eval") + ")";
    bool decoded = false;
    try {
      t.apply_jpeg(jpeg, jpeg_size, p.seed, p.epoch, p.index, out.data());
      decoded = true;
    } catch (const hpctrain::rt::DataError& e) {
      if (full && c == header->channels) {
        fail(where + " refused a JPEG that decodes in full: " + std::string(e.what()));
      }
    }
    if (!decoded) continue;
    if (c != header->channels)
      fail(where + " accepted a JPEG of " + std::to_string(header->channels) + " channels");
    if (!p.uint8_output) check_finite(t, out, where);
    // Where no DCT scaling can apply, the raw path on the full decode gives the same bytes: for
    // training crops always, for evaluation where the raw path too keeps 7/8 of the shorter side.
    const int64_t side = std::min(header->height, header->width);
    const Augment mode = p.train ? cfg.augment : Augment::kNone;
    const bool unscaled = side * 7 < p.image_size * 8;
    if (full && unscaled && (mode == Augment::kRandomResizedCrop || side > p.image_size)) {
      const Transform raw(cfg, info_of(full->rows, full->cols, c));
      std::vector<uint8_t> expected(raw.sample_output_bytes());
      raw.apply(full->pixels.data(), p.seed, p.epoch, p.index, expected.data());
      if (expected != out) fail(where + " differs from apply() on the full decode");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_one(data, size);
  return 0;
}
