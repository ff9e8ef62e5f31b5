// Image folder (root/class_name/*.jpg|png|...) -> hpctrain HDF5, decoded with stb_image and
// resized with stb_image_resize (Debian's libstb): the center square of the shorter side is
// resized to size x size, so aspect ratio is kept and every image has the same shape.
#include <stb_image.h>
#include <stb_image_resize.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <memory>

#include "common/error.hpp"
#include "convert.hpp"
#include "convert_common.hpp"
#include "progress.hpp"

namespace hpctrain::datasets {

namespace fs = std::filesystem;

namespace {

struct StbiFree {
  void operator()(unsigned char* p) const { stbi_image_free(p); }
};

}  // namespace

ConvertSummary convert_image_folder(const std::string& root, const std::string& output,
                                    int64_t size, int64_t channels, const ConvertOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (size < 1 || size > data::kMaxSide) {
    HPCTRAIN_THROW(rt::DataError, "image folder: size " + std::to_string(size) + " outside [1, " +
                                      std::to_string(data::kMaxSide) + "]");
  }
  if (channels != 1 && channels != 3)
    HPCTRAIN_THROW(rt::DataError, "image folder: channels must be 1 or 3");
  std::error_code ec;
  if (!fs::is_directory(root, ec)) HPCTRAIN_THROW(rt::DataError, root + ": not a directory");

  std::vector<std::string> classes;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  }
  std::sort(classes.begin(), classes.end());
  if (classes.empty()) HPCTRAIN_THROW(rt::DataError, root + ": no class subdirectories");
  std::vector<std::pair<std::string, int64_t>> files;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> in_class;
    for (const auto& entry : fs::directory_iterator(fs::path(root) / classes[c])) {
      if (entry.is_regular_file() && is_image_file(entry.path())) {
        in_class.push_back(entry.path().string());
      }
    }
    std::sort(in_class.begin(), in_class.end());
    for (auto& f : in_class) files.emplace_back(std::move(f), static_cast<int64_t>(c));
  }
  if (files.empty())
    HPCTRAIN_THROW(rt::DataError, root + ": no images found under the class directories");

  const auto n = static_cast<int64_t>(files.size());
  DatasetWriter writer(output, n, size, size, channels, classes, {options.chunk_images});
  Progress progress(options.progress, "images", n);
  BlockWriter out(writer, size * size * channels, /*block_images=*/256, progress);
  for (const auto& [path, label] : files) {
    int w = 0, h = 0, comp = 0;
    std::unique_ptr<unsigned char, StbiFree> pixels(
        stbi_load(path.c_str(), &w, &h, &comp, static_cast<int>(channels)));
    if (!pixels) {
      HPCTRAIN_THROW(rt::DataError, path + ": cannot decode image: " + stbi_failure_reason());
    }
    if (w < 1 || h < 1 || w > 65536 || h > 65536) {
      HPCTRAIN_THROW(rt::DataError, path + ": image size " + std::to_string(w) + "x" +
                                        std::to_string(h) + " out of range");
    }
    const int side = std::min(w, h);
    const int top = (h - side) / 2, left = (w - side) / 2;
    const unsigned char* crop =
        pixels.get() + (static_cast<size_t>(top) * w + left) * static_cast<size_t>(channels);
    uint8_t* dst = out.next_slot();
    if (stbir_resize_uint8(crop, side, side, w * static_cast<int>(channels), dst,
                           static_cast<int>(size), static_cast<int>(size), 0,
                           static_cast<int>(channels)) == 0) {
      HPCTRAIN_THROW(rt::DataError, path + ": resize failed");
    }
    out.add(label);
  }
  out.flush();
  return finish_conversion(writer, output, out.labels(), t0);
}

}  // namespace hpctrain::datasets
