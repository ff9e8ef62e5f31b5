// The static step's pieces (train/static_step.hpp): the host-read guard, the address record, and
// the step graphs' eager twin on the CPU. The step itself against today's step runs on real
// worker processes (tests/integration/resume_combinations.sh static, rollback.sh, static_step.sh).
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>

#include "common/error.hpp"
#include "train/host_reads.hpp"
#include "train/static_step.hpp"
#include "train/step_graphs.hpp"

namespace hpctrain::train {
namespace {

TEST(HostReadGuard, RefusesAReadOfTheScopesOwn) {
  const at::Tensor t = torch::ones({4});
  HostReadGuard guard;
  const at::Tensor sum = t.sum();
  EXPECT_EQ(guard.first_read(), "");
  (void)sum.item<float>();  // the planted read
  EXPECT_EQ(guard.first_read(), "aten::item");
  try {
    guard.check("the body");
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the body read a tensor's value on the host (aten::item)"),
              std::string::npos)
        << e.what();
  }
}

TEST(HostReadGuard, SeesEveryKindOfRead) {
  const at::Tensor t = torch::arange(6).reshape({2, 3});
  const auto first = [](const std::function<void()>& f) {
    HostReadGuard guard;
    f();
    return guard.first_read();
  };
  EXPECT_EQ(first([&] { (void)t.nonzero(); }), "aten::nonzero");
  EXPECT_EQ(first([&] { (void)t.equal(t); }), "aten::equal");
  EXPECT_EQ(first([&] { (void)t.masked_select(t > 2); }), "aten::masked_select");
  EXPECT_EQ(first([&] { (void)static_cast<bool>(t.sum().is_nonzero()); }), "aten::is_nonzero");
  EXPECT_EQ(first([&] { (void)(t * 2).add_(1).sum(); }), "");
}

TEST(HostReadGuard, LetsOperatorsReadTheirOwnArguments) {
  // torch's CPU fused SGD with a tensor learning rate reads it on the host inside the operator
  // (the CUDA kernel reads it on the device): not the step's own read.
  at::Tensor p = torch::ones({8}), g = torch::full({8}, 0.5), buf = torch::zeros({8});
  const at::Tensor lr = torch::full({}, 0.1, torch::kDouble);
  HostReadGuard guard;
  at::_fused_sgd_({p}, {g}, {buf}, 0.0, 0.9, lr, 0.0, false, false, false);
  EXPECT_EQ(guard.first_read(), "");
  EXPECT_TRUE(torch::allclose(p, torch::full({8}, 0.95)));
}

TEST(HostReadGuard, SeesReadsInBackward) {
  // A read inside the backward of the scope's own graph: autograd runs it on this thread (the
  // CPU), nested in the backward node, so it is the node's; a read at the scope's top level after
  // backward is the scope's.
  at::Tensor w = torch::ones({3}, torch::requires_grad());
  HostReadGuard guard;
  (w * 2).sum().backward();
  EXPECT_EQ(guard.first_read(), "");
  (void)w.grad().sum().item<double>();
  EXPECT_EQ(guard.first_read(), "aten::item");
}

TEST(HostReadGuard, EndsWithItsScope) {
  { HostReadGuard guard; }
  HostReadGuard guard;
  EXPECT_EQ(guard.first_read(), "");
  EXPECT_NO_THROW(guard.check("clean"));
}

TEST(StaticAddresses, NamesTheTensorThatMoved) {
  const at::Tensor a = torch::zeros({4}), b = torch::zeros({4});
  StaticAddresses record;
  EXPECT_FALSE(record.recorded());
  record.record({{"a", a.data_ptr()}, {"b", b.data_ptr()}});
  EXPECT_NO_THROW(record.verify({{"a", a.data_ptr()}, {"b", b.data_ptr()}}));
  const at::Tensor moved = torch::zeros({4});
  try {
    record.verify({{"a", a.data_ptr()}, {"b", moved.data_ptr()}});
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the static step's b moved from"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(record.verify({{"a", a.data_ptr()}}), rt::Error);
  EXPECT_THROW(record.verify({{"a", a.data_ptr()}, {"b", b.data_ptr()}, {"c", b.data_ptr()}}),
               rt::Error);
  EXPECT_THROW(record.verify({{"b", b.data_ptr()}, {"a", a.data_ptr()}}), rt::Error);
}

TEST(StepGraphs, TheTwinRunsEverySegmentEagerlyUnderTheGuard) {
  StepGraphs graphs(at::Device(at::kCPU), {"one", "two"}, /*capture=*/true, /*warmup_steps=*/2);
  EXPECT_FALSE(graphs.capture());  // the CPU: the eager twin
  at::Tensor x = torch::zeros({2});
  for (int step = 0; step < 5; ++step) {
    graphs.begin_step();
    graphs.set_static_shapes(true);
    EXPECT_FALSE(graphs.graphed());
    graphs.run(0, [&](bool capturing) {
      EXPECT_FALSE(capturing);
      x.add_(1);
    });
    graphs.run(1, [&](bool) { x.mul_(2); });
    graphs.end_step();
  }
  EXPECT_EQ(graphs.captures(), 0);
  EXPECT_EQ(graphs.replays(), 0);
  EXPECT_TRUE(torch::equal(x, torch::full({2}, 62.0)));
  graphs.begin_step();
  graphs.set_static_shapes(true);
  try {
    graphs.run(1, [&](bool) { (void)x.sum().item<float>(); });
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("the static step's segment 'two' read a tensor's value"),
              std::string::npos)
        << e.what();
  }
}

TEST(StepGraphs, AutocastsWeightCacheIsOffInsideASegment) {
  StepGraphs graphs(at::Device(at::kCPU), {"one"}, false, 0);
  const bool before = at::autocast::is_autocast_cache_enabled();
  graphs.begin_step();
  graphs.set_static_shapes(true);
  graphs.run(0, [&](bool) { EXPECT_FALSE(at::autocast::is_autocast_cache_enabled()); });
  graphs.end_step();
  EXPECT_EQ(at::autocast::is_autocast_cache_enabled(), before);
}

}  // namespace
}  // namespace hpctrain::train
