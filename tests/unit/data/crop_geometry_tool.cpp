// Prints hpctrain's crop boxes for crop_geometry_check.py to compare with torchvision's. Reads
// commands from stdin, one a line, and writes boxes "top left height width", one a line:
//   center H W OUT FRACTION_ALWAYS           center_crop_box of an H x W image for an OUT x OUT
//                                            output (FRACTION_ALWAYS 1: the JPEG path's rule)
//   rrc H W N SEED MIN_SCALE MAX_SCALE       random_resized_crop_box of samples 0..N-1 of epoch 0,
//                                            each from the generator Transform::apply seeds
// Exit 2 with a message on stderr for a line it does not understand.
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "data/augment.hpp"
#include "data/rng.hpp"

namespace {

using namespace hpctrain::data;

void print(const PixelBox& b) {
  std::cout << b.top << ' ' << b.left << ' ' << b.height << ' ' << b.width << '\n';
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    TransformConfig cfg;
    if (cmd == "center") {
      int64_t h = 0, w = 0, out = 0;
      int fraction_always = 0;
      if (in >> h >> w >> out >> fraction_always) {
        print(center_crop_box(h, w, out, out, cfg, fraction_always != 0));
        continue;
      }
    } else if (cmd == "rrc") {
      int64_t h = 0, w = 0, n = 0;
      uint64_t seed = 0;
      if (in >> h >> w >> n >> seed >> cfg.min_scale >> cfg.max_scale) {
        for (int64_t i = 0; i < n; ++i) {
          SplitMix64 rng(derive_key(seed, 0, static_cast<uint64_t>(i), kAugmentDomain));
          print(random_resized_crop_box(h, w, cfg, rng));
        }
        continue;
      }
    }
    std::cerr << "crop_geometry_tool: cannot read \"" << line << "\"\n";
    return 2;
  }
  return 0;
}
