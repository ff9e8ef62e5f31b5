// GradSync (runtime/dist/grad_sync.hpp), every test of it: in one process, in seconds, with several
// ranks as threads,
// each with a real c10d Gloo process group over a FileStore in a temporary directory, as c10d's
// own tests run. Each rank's loss gives every parameter a gradient known in closed form; after
// finish() every rank must hold their average exactly, in every bucket, the last one included.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "common/error.hpp"
#include "dist/grad_sync.hpp"
#include "dist/process_group.hpp"
#include "support/gloo_communicator.hpp"

namespace hpctrain::dist {
namespace {

using test::GlooCommunicator;

// Parameter sizes in registration order. With a 10-float bucket cap they fall into four buckets
// (reverse order): {5, 4}, {3}, {2}, {1, 0}: the first and the last hold two parameters each.
const std::vector<std::vector<int64_t>> kShapes = {{3}, {5}, {2, 4}, {7}, {1}, {6}};
const std::vector<std::vector<size_t>> kLayout = {{5, 4}, {3}, {2}, {1, 0}};
constexpr double kBucketMb = 10.0 * sizeof(float) / (1024 * 1024);

// The gradient rank r gets for parameter k in step s: (r + 1)(k + 1)(s + 1)(i + 1) at flat index
// i; small integers, so every sum and the division by a power-of-two world size are exact.
at::Tensor local_grad(int rank, size_t k, int step) {
  const int64_t n = c10::multiply_integers(kShapes[k]);
  return torch::arange(1, n + 1, torch::kFloat32).mul((rank + 1) * (k + 1) * (step + 1));
}

// Their average over `world` ranks, in closed form: the mean of (r + 1) is (world + 1) / 2.
at::Tensor expected_average(int world, size_t k, int step) {
  return local_grad(0, k, step).mul((world + 1) / 2.0);
}

struct RankResult {
  std::vector<std::vector<size_t>> layout;
  std::vector<std::vector<at::Tensor>> grads;  // per step, per parameter (flattened)
};

// Runs `steps` training steps on `world` threads; returns what each rank's parameters held.
// `now`: backward's hooks off and every bucket all-reduced after it (the static step's way).
std::vector<RankResult> run_ranks(int world, int steps, GradSyncOptions options, bool now = false) {
  std::vector<RankResult> results(static_cast<size_t>(world));
  test::on_gloo_ranks(world, [&](GlooCommunicator& comm) {
    const int rank = comm.rank();
    std::vector<std::string> names;
    std::vector<at::Tensor> params;
    for (size_t k = 0; k < kShapes.size(); ++k) {
      names.push_back("p" + std::to_string(k));
      params.push_back(torch::zeros(kShapes[k]).requires_grad_(true));
    }
    GradSync sync(names, params, comm, options);
    if (now) sync.set_enabled(false);
    RankResult& out = results[static_cast<size_t>(rank)];
    out.layout = sync.bucket_layout();
    for (int step = 0; step < steps; ++step) {
      for (auto& p : params) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      sync.prepare();
      at::Tensor loss = torch::zeros({});
      for (size_t k = 0; k < params.size(); ++k) {
        loss = loss + (params[k].reshape({-1}) * local_grad(rank, k, step)).sum();
      }
      loss.backward();
      if (now) {
        sync.all_reduce_now();
        EXPECT_FALSE(sync.enabled());
      } else {
        sync.finish();
      }
      std::vector<at::Tensor> grads;
      for (auto& p : params) grads.push_back(p.grad().reshape({-1}).clone());
      out.grads.push_back(grads);
    }
  });
  return results;
}

void expect_averaged(int world, int steps, GradSyncOptions options, bool now = false) {
  const auto results = run_ranks(world, steps, options, now);
  for (int rank = 0; rank < world; ++rank) {
    const RankResult& r = results[static_cast<size_t>(rank)];
    ASSERT_EQ(r.layout, kLayout) << "the parameters no longer fill several buckets";
    for (int step = 0; step < steps; ++step) {
      for (size_t k = 0; k < kShapes.size(); ++k) {
        const at::Tensor want = expected_average(world, k, step);
        const at::Tensor got = r.grads[static_cast<size_t>(step)][k];
        EXPECT_TRUE(torch::equal(got, want))
            << "rank " << rank << " step " << step << " p" << k
            << " (bucket holding it: " << (k <= 1 ? "the last" : "not the last") << ")\n got "
            << got << "\nwant " << want;
      }
    }
  }
}

constexpr auto kNone = spec::GradCompression::kNone;
constexpr auto kFp16 = spec::GradCompression::kFp16;

TEST(GradSync, AveragesEveryBucketWhileBackwardRuns) {
  expect_averaged(/*world=*/4, /*steps=*/2, {kBucketMb, kNone, /*overlap=*/true});
}
TEST(GradSync, AllReduceNowAveragesEveryBucketWithoutTheHooks) {
  expect_averaged(/*world=*/4, /*steps=*/2, {kBucketMb, kNone, /*overlap=*/true}, /*now=*/true);
}

TEST(GradSync, AveragesEveryBucketAfterBackward) {
  expect_averaged(/*world=*/4, /*steps=*/2, {kBucketMb, kNone, /*overlap=*/false});
}

TEST(GradSync, AveragesThroughFp16Compression) {
  expect_averaged(/*world=*/2, /*steps=*/1, {kBucketMb, kFp16, /*overlap=*/true});
}

// train.grad_compression is the type on the wire, and each choice rounds a gradient its own way:
// 1 + 2^-9 needs 9 mantissa bits (fp16 has 10, bf16 7: it arrives as 1), 2^-30 is below fp16's
// smallest subnormal (2^-24: it arrives as 0) and within bf16's range. Both ranks send the same
// gradient, so the average is the value as the wire type holds it. fp16 sent as bf16, or either
// as fp32, gives another row of this table.
TEST(GradSync, EachCompressionPutsItsOwnTypeOnTheWire) {
  const float a = 1.0f + std::ldexp(1.0f, -9);
  const float b = std::ldexp(1.0f, -30);
  struct Case {
    spec::GradCompression compression;
    std::vector<float> arrives;
  };
  const std::vector<Case> cases = {
      {kNone, {a, b}}, {kFp16, {a, 0.0f}}, {spec::GradCompression::kBf16, {1.0f, b}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("train.grad_compression = ") +
                 std::string(spec::name_of(c.compression)));
    std::vector<at::Tensor> got(2);
    test::on_gloo_ranks(2, [&](GlooCommunicator& comm) {
      at::Tensor p = torch::zeros({2}).requires_grad_(true);
      GradSync sync({"p"}, {p}, comm, {kBucketMb, c.compression, /*overlap=*/true});
      sync.prepare();
      (p * torch::tensor({a, b})).sum().backward();
      sync.finish();
      got[static_cast<size_t>(comm.rank())] = p.grad().clone();
    });
    for (const at::Tensor& g : got) {
      EXPECT_EQ(g.scalar_type(), at::kFloat) << "the gradient is not back in fp32";
      EXPECT_TRUE(torch::equal(g, torch::tensor(c.arrives)))
          << "the averaged gradient is " << g << ", want " << torch::tensor(c.arrives)
          << ": the gradients did not travel as the chosen type";
    }
  }
}

TEST(GradSync, OneRankKeepsItsOwnGradients) {
  expect_averaged(/*world=*/1, /*steps=*/1, {kBucketMb, kNone, /*overlap=*/true});
}

TEST(GradSync, MemoryOrderViewIsAViewOfDenseTensors) {
  const at::Tensor nchw = torch::arange(48, torch::kFloat32).reshape({2, 3, 2, 4});
  const at::Tensor cl = nchw.contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor flat = memory_order_view(cl);
  ASSERT_TRUE(flat.defined());
  EXPECT_EQ(flat.data_ptr(), cl.data_ptr()) << "a copy, not a view";
  EXPECT_TRUE(torch::equal(flat, cl.permute({0, 2, 3, 1}).reshape({-1})));
  EXPECT_EQ(memory_order_view(nchw).data_ptr(), nchw.data_ptr());
  // Every other row: not one dense block.
  EXPECT_FALSE(memory_order_view(nchw.slice(/*dim=*/2, 0, 2, /*step=*/2)).defined());
}

// Convolution weights in channels_last (the GPU's memory format): the gradients keep their strides
// and hold the exact average.
TEST(GradSync, AveragesChannelsLastGradients) {
  constexpr int kWorld = 2;
  const std::vector<int64_t> shape = {4, 3, 2, 2};
  auto local = [&](int rank) {
    return torch::arange(1, 49, torch::kFloat32).reshape(shape).mul(rank + 1);
  };
  std::vector<at::Tensor> grads(kWorld);
  test::on_gloo_ranks(kWorld, [&](GlooCommunicator& comm) {
    std::vector<at::Tensor> params = {
        torch::zeros(shape).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true),
        torch::zeros({5}).requires_grad_(true)};
    GradSync sync({"w", "b"}, params, comm, {kBucketMb, kNone, /*overlap=*/true});
    sync.prepare();
    ((params[0] * local(comm.rank())).sum() + params[1].sum()).backward();
    sync.finish();
    grads[static_cast<size_t>(comm.rank())] = params[0].grad();
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    const at::Tensor& g = grads[static_cast<size_t>(rank)];
    EXPECT_TRUE(g.is_contiguous(at::MemoryFormat::ChannelsLast)) << "rank " << rank;
    EXPECT_TRUE(torch::equal(g, local(0).mul(1.5))) << "rank " << rank << "\n" << g;
  }
}

// In one process: the bucket plan, world size one, a parameter left without a gradient.
// A process group of one (hpctrain's own bootstrap, no Slurm): what a single-rank job runs.
std::unique_ptr<ProcessGroup> single() {
  WorldInfo w;
  w.hostname = "localhost";
  return join(w, {}, {});
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

// Local SGD's local steps: switched off, every rank keeps its own gradients (no collective), and
// switched on again, the next step averages as before.
TEST(GradSync, SwitchedOffEachRankKeepsItsOwnGradientsThenAveragesAgain) {
  constexpr int kWorld = 2;
  std::vector<std::vector<at::Tensor>> got(kWorld);
  test::on_gloo_ranks(kWorld, [&](GlooCommunicator& comm) {
    const int rank = comm.rank();
    std::vector<std::string> names;
    std::vector<at::Tensor> params;
    for (size_t k = 0; k < kShapes.size(); ++k) {
      names.push_back("p" + std::to_string(k));
      params.push_back(torch::zeros(kShapes[k]).requires_grad_(true));
    }
    GradSync sync(names, params, comm, {kBucketMb, kNone, true});
    for (int step = 0; step < 3; ++step) {
      sync.set_enabled(step != 1);
      for (auto& p : params) {
        if (p.grad().defined()) p.mutable_grad().zero_();
      }
      sync.prepare();
      at::Tensor loss = torch::zeros({});
      for (size_t k = 0; k < params.size(); ++k) {
        loss = loss + (params[k].reshape({-1}) * local_grad(rank, k, step)).sum();
      }
      loss.backward();
      sync.finish();
      got[static_cast<size_t>(rank)].push_back(params[5].grad().reshape({-1}).clone());
    }
  });
  for (int rank = 0; rank < kWorld; ++rank) {
    const auto& g = got[static_cast<size_t>(rank)];
    EXPECT_TRUE(torch::equal(g[0], expected_average(kWorld, 5, 0))) << "rank " << rank;
    EXPECT_TRUE(torch::equal(g[1], local_grad(rank, 5, 1))) << "rank " << rank << " off: " << g[1];
    EXPECT_TRUE(torch::equal(g[2], expected_average(kWorld, 5, 2))) << "rank " << rank;
  }
}

}  // namespace
}  // namespace hpctrain::dist
