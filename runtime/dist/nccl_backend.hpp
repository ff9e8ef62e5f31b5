// The NCCL backend, compiled only in CUDA builds (HPCTRAIN_WITH_NCCL); this header stays free of
// CUDA headers so the rest of the runtime compiles the same either way.
// Thread safety: call from the main thread while joining.
#pragma once

#include <chrono>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace hpctrain::dist {

// ProcessGroupNCCL on `device`, with `timeout` for every collective; communicators are created
// eagerly (bound to the device) so a missing rank shows up at join time, not at the first step.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout, int device);

}  // namespace hpctrain::dist
