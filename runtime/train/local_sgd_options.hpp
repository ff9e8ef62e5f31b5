// Local SGD's options (train/local_sgd.hpp) and where they come from in the spec: [train]
// sync_every_steps, sync_warmup_steps, outer_optimizer, outer_lr, outer_momentum. Torch-free, so
// its tests build in seconds.
// Thread safety: plain data and a pure function.
#pragma once

#include <cstdint>

#include "spec/choices.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

struct LocalSgdOptions {
  int64_t every_steps = 16;  // local steps between averagings, >= 1
  int64_t warmup_steps = 0;  // steps of all-reduce training first
  spec::OuterOptimizer outer = spec::OuterOptimizer::kNone;
  double outer_lr = 0.7, outer_momentum = 0.9;
};
LocalSgdOptions local_sgd_options_from_spec(const spec::Spec& spec);

}  // namespace hpctrain::train
