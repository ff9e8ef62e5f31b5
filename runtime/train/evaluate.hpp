// Evaluation over the exact validation set: every sample counted once across all ranks. The
// validation loader pads each rank's shard to the same length (collectives need the same batch
// count everywhere); the padding is the tail of each rank's reading order and is left out here,
// so the figures equal a single-process evaluation of the whole set.
// Thread safety: training thread only; collective (every rank calls it).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "data/loader.hpp"
#include "dist/communicator.hpp"

namespace hpctrain::train {

struct EvalResult {
  int64_t samples = 0;  // over all ranks; equals the validation set's size
  double loss = 0;      // mean cross-entropy (no label smoothing)
  double top1 = 0;      // fractions in [0, 1]
  double top5 = 0;      // top-min(5, classes)
};

using Forward = std::function<at::Tensor(const at::Tensor& images)>;
// Turns a loader batch into (images, labels) tensors on the device.
using ToDevice = std::function<std::pair<at::Tensor, at::Tensor>(const data::Batch& batch)>;

// Reads one epoch of `loader` (from position 0) through `forward` under no_grad and reduces the
// counts over `comm`. `num_samples` is the validation set's size.
EvalResult evaluate(const Forward& forward, const ToDevice& to_device, data::Loader& loader,
                    int64_t num_samples, dist::Communicator& comm);

}  // namespace hpctrain::train
