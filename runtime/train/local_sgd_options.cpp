#include "train/local_sgd_options.hpp"

#include "spec/spec.hpp"

namespace hpctrain::train {

LocalSgdOptions local_sgd_options_from_spec(const spec::Spec& spec) {
  LocalSgdOptions o;
  o.every_steps = spec.train.sync_every_steps;
  o.warmup_steps = spec.train.sync_warmup_steps;
  o.outer = spec.train.outer_optimizer;
  o.outer_lr = spec.train.outer_lr;
  o.outer_momentum = spec.train.outer_momentum;
  return o;
}

}  // namespace hpctrain::train
