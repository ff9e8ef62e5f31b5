// info_of(): the smallest DatasetInfo a Transform accepts, for the data tests and the JPEG fuzz
// target (which cannot take test_util.hpp's HDF5 helpers). Header-only; needs data/format.hpp.
#pragma once

#include <cstdint>

#include "data/format.hpp"

namespace hpctrain::data::testing {

// The summary of an h x w x c dataset of one sample, 2 classes, mean 0.25 and std 0.5: what a
// Transform needs.
inline DatasetInfo info_of(int64_t h, int64_t w, int64_t c) {
  DatasetInfo in;
  in.num_samples = 1;
  in.height = h;
  in.width = w;
  in.channels = c;
  in.num_classes = 2;
  in.mean.assign(static_cast<size_t>(c), 0.25);
  in.std.assign(static_cast<size_t>(c), 0.5);
  return in;
}

}  // namespace hpctrain::data::testing
