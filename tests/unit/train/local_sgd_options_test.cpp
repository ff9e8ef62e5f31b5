// train/local_sgd_options.hpp: every [train] key of local SGD, written in a spec file, reaches
// its field of LocalSgdOptions (outer_lr and outer_momentum among them, easily swapped), and the
// defaults docs/runtime.md names when none is written.
#include "train/local_sgd_options.hpp"

#include <gtest/gtest.h>

#include <string>

#include "spec/spec.hpp"
#include "support/test_util.hpp"

namespace hpctrain::train {
namespace {

// A minimal spec with `train` (TOML lines) as its [train] table.
spec::Spec load_spec(const test::TempDir& dir, const std::string& train) {
  return spec::load(test::spec_in(dir, test::minimal_spec("[train]\n" + train))).spec;
}

TEST(LocalSgdOptionsFromSpec, EveryKeyReachesItsField) {
  test::TempDir dir;
  const LocalSgdOptions o = local_sgd_options_from_spec(load_spec(dir,
                                                                  "sync = \"local_sgd\"\n"
                                                                  "sync_every_steps = 7\n"
                                                                  "sync_warmup_steps = 11\n"
                                                                  "outer_optimizer = \"nesterov\"\n"
                                                                  "outer_lr = 0.3\n"
                                                                  "outer_momentum = 0.5\n"));
  EXPECT_EQ(o.every_steps, 7);
  EXPECT_EQ(o.warmup_steps, 11);
  EXPECT_EQ(o.outer, spec::OuterOptimizer::kNesterov);
  EXPECT_DOUBLE_EQ(o.outer_lr, 0.3);
  EXPECT_DOUBLE_EQ(o.outer_momentum, 0.5);
}

TEST(LocalSgdOptionsFromSpec, DefaultsAreTheDocumentedOnes) {
  test::TempDir dir;
  const LocalSgdOptions o = local_sgd_options_from_spec(load_spec(dir, "sync = \"local_sgd\"\n"));
  EXPECT_EQ(o.every_steps, 16);
  EXPECT_EQ(o.warmup_steps, 0);
  EXPECT_EQ(o.outer, spec::OuterOptimizer::kNone);
  EXPECT_DOUBLE_EQ(o.outer_lr, 0.7);
  EXPECT_DOUBLE_EQ(o.outer_momentum, 0.9);
}

}  // namespace
}  // namespace hpctrain::train
