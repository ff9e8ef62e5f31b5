// Writes what hpctrain's JPEG path makes of JPEG files, for jpeg_torchvision_check.py to compare
// with PIL and torchvision on the same files:
//   jpeg_tool full FILE...            each file's full decode (H x W x C uint8), concatenated
//   jpeg_tool eval SIZE FILE...       each file's evaluation crop at SIZE x SIZE (uint8 HWC)
// on stdout. Exit 2 with the error on stderr for a file the decoder refuses.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "data/augment.hpp"
#include "data/jpeg.hpp"

namespace {

using namespace hpctrain::data;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write(const uint8_t* data, size_t size) {
  if (std::fwrite(data, 1, size, stdout) != size) throw std::runtime_error("cannot write stdout");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool full = !args.empty() && args[0] == "full";
  const bool eval = args.size() >= 2 && args[0] == "eval";
  if (!full && !eval) {
    std::cerr << "usage: jpeg_tool full FILE... | jpeg_tool eval SIZE FILE...\n";
    return 2;
  }
  try {
    for (size_t i = eval ? 2 : 1; i < args.size(); ++i) {
      const auto bytes = read_file(args[i]);
      const JpegHeader h = read_jpeg_header(bytes.data(), bytes.size());
      if (full) {
        const auto d = decode_region(bytes.data(), bytes.size(), {0, 0, h.height, h.width},
                                     h.height, h.width, /*allow_scaling=*/false);
        write(d.pixels.data(), d.pixels.size());
        continue;
      }
      DatasetInfo info;
      info.num_samples = 1;
      info.height = h.height;
      info.width = h.width;
      info.channels = h.channels;
      info.num_classes = 1;
      info.mean.assign(static_cast<size_t>(h.channels), 0.5);
      info.std.assign(static_cast<size_t>(h.channels), 0.25);
      TransformConfig cfg;
      cfg.augment = Augment::kRandomResizedCrop;
      cfg.train = false;
      cfg.image_size = std::stoll(args[1]);
      cfg.layout = Layout::kNHWC;
      cfg.output = OutputType::kUint8;
      const Transform t(cfg, info);
      std::vector<uint8_t> out(t.sample_output_bytes());
      t.apply_jpeg(bytes.data(), bytes.size(), 0, 0, 0, out.data());
      write(out.data(), out.size());
    }
  } catch (const std::exception& e) {
    std::cerr << "jpeg_tool: " << e.what() << '\n';
    return 2;
  }
  return 0;
}
