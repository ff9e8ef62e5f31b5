// train/straggler.hpp's straggler_watch_from_spec(): resilience.straggler_ratio and
// resilience.straggler_windows, written in a spec file, are the eviction verdict's ratio and
// count of windows (not the defaults, 1.5 and 3).
#include <gtest/gtest.h>

#include <string>

#include "spec/spec.hpp"
#include "support/test_util.hpp"
#include "train/straggler.hpp"

namespace hpctrain::train {
namespace {

// A minimal two-node spec that evicts stragglers, with `resilience` (TOML lines) added.
spec::Spec load_spec(const test::TempDir& dir, const std::string& resilience) {
  const std::string text =
      test::minimal_spec("[resilience]\nevict_stragglers = true\nspare_nodes = 1\n" + resilience);
  return spec::load(test::spec_in(dir, text, {"job.nodes=2"})).spec;
}

TEST(StragglerWatchFromSpec, TheSpecsRatioAndWindowsDecide) {
  test::TempDir dir;
  const spec::Spec spec = load_spec(dir, "straggler_ratio = 3.0\nstraggler_windows = 5\n");
  StragglerWatch watch = straggler_watch_from_spec(spec.resilience);
  // 2.9x the other node: behind at the default ratio (1.5), not at 3.
  for (int window = 0; window < 10; ++window) {
    EXPECT_FALSE(watch.observe({{"a", 1.0}, {"b", 2.9}}).has_value()) << "window " << window;
    EXPECT_EQ(watch.streak(), 0);
  }
  // 3.1x: behind, and let go at the fifth window in a row (not the default third).
  for (int window = 1; window < 5; ++window) {
    EXPECT_FALSE(watch.observe({{"a", 1.0}, {"b", 3.1}}).has_value()) << "window " << window;
    EXPECT_EQ(watch.streak(), window);
  }
  const auto verdict = watch.observe({{"a", 1.0}, {"b", 3.1}});
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->node, "b");
  EXPECT_EQ(verdict->windows, 5);
}

TEST(StragglerWatchFromSpec, DefaultsAreTheDocumentedOnes) {
  test::TempDir dir;
  StragglerWatch watch = straggler_watch_from_spec(load_spec(dir, "").resilience);
  // 1.6x: behind at 1.5; let go at the third window.
  EXPECT_FALSE(watch.observe({{"a", 1.0}, {"b", 1.6}}).has_value());
  EXPECT_FALSE(watch.observe({{"a", 1.0}, {"b", 1.6}}).has_value());
  const auto verdict = watch.observe({{"a", 1.0}, {"b", 1.6}});
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->windows, 3);
}

TEST(StragglerMonitorFromSpec, EvictsOnlyWhenTheSpecSaysSo) {
  test::TempDir dir;
  const std::vector<std::string> hosts = {"n1", "n1", "n2", "n2"};
  const std::vector<double> p50 = {0.010, 0.011, 0.100, 0.012};  // n2's rank 2 far behind
  StragglerMonitor evicting = straggler_monitor_from_spec(load_spec(dir, "").resilience, hosts);
  std::optional<Eviction> e;
  for (int window = 1; window <= 3 && !e; ++window) e = evicting.watch(p50);
  ASSERT_TRUE(e.has_value()) << "no eviction after the default 3 windows";
  EXPECT_EQ(e->node, "n2");
  EXPECT_EQ(e->ranks, (std::vector<int>{2, 3}));

  const std::string off = test::minimal_spec("[resilience]\nevict_stragglers = false\n");
  StragglerMonitor watching =
      straggler_monitor_from_spec(spec::load(test::spec_in(dir, off)).spec.resilience, hosts);
  for (int window = 0; window < 10; ++window) EXPECT_FALSE(watching.watch(p50)) << window;
  // The log window's comparison does not depend on eviction.
  ASSERT_TRUE(watching.compare(p50));
  EXPECT_TRUE(watching.compare(p50)->behind);
  EXPECT_EQ(watching.compare(p50)->slowest, 2);
}

}  // namespace
}  // namespace hpctrain::train
