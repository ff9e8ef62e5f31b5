// Runtime pieces that need libtorch but one process: the communicator at world size 1, GradSync's
// buckets and its errors.
#include <gtest/gtest.h>
#include <signal.h>

#include <torch/torch.h>

#include "common/error.hpp"
#include "dist/grad_sync.hpp"
#include "dist/process_group.hpp"

namespace hpctrain::dist {
namespace {

std::unique_ptr<ProcessGroup> single() {
  WorldInfo w;
  w.hostname = "localhost";
  return join(w, {}, {});
}

TEST(Communicator, WorldSizeOneCollectives) {
  auto group = single();
  auto& comm = group->communicator();
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(group->plan().method, "local");
  auto t = torch::arange(10, torch::kFloat32);
  comm.all_reduce(t);
  EXPECT_TRUE(t.equal(torch::arange(10, torch::kFloat32)));
  std::vector<torch::Tensor> b{torch::ones({3})};
  comm.broadcast(b, 0);
  EXPECT_TRUE(b[0].equal(torch::ones({3})));
  comm.barrier();
}

struct Net : torch::nn::Module {
  Net() {
    a = register_module("a", torch::nn::Linear(64, 64));  // 4160 floats
    b = register_module("b", torch::nn::Linear(64, 64));  // 4160 floats
    c = register_module("c", torch::nn::Linear(64, 2));   // 130 floats
    unused = register_module("unused", torch::nn::Linear(4, 4));
  }
  torch::Tensor forward(torch::Tensor x) { return c(torch::relu(b(torch::relu(a(x))))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, unused{nullptr};
};

std::pair<std::vector<std::string>, std::vector<torch::Tensor>> named(torch::nn::Module& m) {
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  for (auto& p : m.named_parameters()) {
    names.push_back(p.key());
    params.push_back(p.value());
  }
  return {names, params};
}

TEST(GradSync, BucketsFollowReverseRegistrationOrderAndTheCap) {
  auto group = single();
  Net net;
  net.unused->weight.set_requires_grad(false);
  net.unused->bias.set_requires_grad(false);
  auto [names, params] = named(net);
  // 16.5 KiB buckets: a 64x64 weight (16 KiB) does not fit beside 776 bytes of c and b.bias,
  // but a.bias (256 B) fits beside b.weight.
  GradSync sync(names, params, group->communicator(),
                {16.5 / 1024, spec::GradCompression::kNone, true});
  const auto layout = sync.bucket_layout();
  // Registration order: a.weight(0) a.bias(1) b.weight(2) b.bias(3) c.weight(4) c.bias(5).
  ASSERT_EQ(layout.size(), 3u);
  EXPECT_EQ(layout[0], (std::vector<size_t>{5, 4, 3}));
  EXPECT_EQ(layout[1], (std::vector<size_t>{2, 1}));
  EXPECT_EQ(layout[2], (std::vector<size_t>{0}));
}

TEST(GradSync, AveragedGradientsAtWorldSizeOneAreTheGradients) {
  auto group = single();
  Net net;
  net.unused->weight.set_requires_grad(false);
  net.unused->bias.set_requires_grad(false);
  auto [names, params] = named(net);
  for (auto compression : {spec::GradCompression::kNone, spec::GradCompression::kBf16}) {
    SCOPED_TRACE(spec::name_of(compression));
    GradSync sync(names, params, group->communicator(), {0.01, compression, true});
    auto x = torch::randn({8, 64});
    net.zero_grad();
    sync.prepare();
    net.forward(x).sum().backward();
    std::vector<torch::Tensor> before;
    for (auto& p : params)
      before.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
    sync.finish();
    for (size_t i = 0; i < 6; ++i) {
      if (compression == spec::GradCompression::kNone) {
        EXPECT_TRUE(params[i].grad().equal(before[i])) << names[i];
      } else {
        EXPECT_TRUE(params[i].grad().allclose(before[i], 1e-2, 1e-2)) << names[i];
      }
    }
  }
}

TEST(GradSync, AParameterWithoutGradientIsAnErrorNamingIt) {
  auto group = single();
  Net net;  // `unused` requires grad but never takes part in forward
  auto [names, params] = named(net);
  GradSync sync(names, params, group->communicator(), {25.0});
  sync.prepare();
  net.forward(torch::randn({2, 64})).sum().backward();
  try {
    sync.finish();
    FAIL() << "expected an error";
  } catch (const rt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("unused.weight"), std::string::npos) << what;
    EXPECT_NE(what.find("unused.bias"), std::string::npos) << what;
    EXPECT_NE(what.find("got no gradient"), std::string::npos) << what;
  }
}

TEST(GradSync, NoOverlapModeGivesTheSameResult) {
  auto group = single();
  Net net;
  net.unused->weight.set_requires_grad(false);
  net.unused->bias.set_requires_grad(false);
  auto [names, params] = named(net);
  GradSync sync(names, params, group->communicator(), {0.01, spec::GradCompression::kNone, false});
  sync.prepare();
  net.forward(torch::randn({4, 64})).sum().backward();
  auto expected = params[0].grad().clone();
  sync.finish();
  EXPECT_TRUE(params[0].grad().equal(expected));
}

TEST(Errors, CarryRankHostAndPlace) {
  rt::set_rank_context(3, 16, "node017");
  try {
    HPCTRAIN_THROW(rt::PeerError, "lost rank 5 (node018)");
  } catch (const rt::PeerError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[rank 3/16 node017] runtime_test.cpp:", 0), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace hpctrain::dist
