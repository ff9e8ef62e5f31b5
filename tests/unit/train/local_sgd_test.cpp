// LocalSgd (runtime/train/local_sgd.hpp): the averaging of parameters and buffers over ranks (as
// threads, each with a real Gloo process group), the Nesterov outer step against torch.optim's
// SGD on the same outer gradients, the period count, and the state a checkpoint keeps.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "common/error.hpp"
#include "support/gloo_communicator.hpp"
#include "train/local_sgd.hpp"

namespace hpctrain::train {
namespace {

using test::GlooCommunicator;

// Rank r's parameters after a "local step": small integers times (r + 1), so every sum and the
// division by a power-of-two world size are exact.
at::Tensor local_value(int rank, int64_t n, int period) {
  return torch::arange(1, n + 1, torch::kFloat32).mul((rank + 1) * (period + 1));
}

TEST(LocalSgd, AveragingMakesEveryRankHoldTheMeanOfParametersAndFloatBuffers) {
  constexpr int kWorld = 4;
  std::vector<std::vector<at::Tensor>> after(kWorld);
  test::on_gloo_ranks(kWorld, [&](GlooCommunicator& comm) {
    const int r = comm.rank();
    at::Tensor w = torch::zeros({5}).requires_grad_(true);
    at::Tensor b = torch::zeros({2, 3}).requires_grad_(true);
    at::Tensor mean = torch::full({3}, static_cast<float>(r));
    at::Tensor count = torch::full({1}, 10 + r, torch::kLong);  // integer: left alone
    LocalSgd sgd({{"w", w}, {"b", b}}, {{"mean", mean}, {"count", count}}, comm,
                 {/*every_steps=*/3, /*warmup_steps=*/2, spec::OuterOptimizer::kNone, 0.7, 0.9});
    EXPECT_FALSE(sgd.local(1));
    EXPECT_TRUE(sgd.local(2));
    for (int step = 0; step < 3; ++step) {
      EXPECT_FALSE(sgd.due()) << "step " << step;
      sgd.start_local_step();
    }
    EXPECT_TRUE(sgd.due());
    EXPECT_TRUE(sgd.diverged());
    {
      torch::NoGradGuard no_grad;
      w.copy_(local_value(r, 5, 0));
      b.copy_(local_value(r, 6, 0).view({2, 3}));
    }
    sgd.synchronize();
    EXPECT_FALSE(sgd.diverged());
    EXPECT_FALSE(sgd.due());
    EXPECT_EQ(sgd.synchronizations(), 1);
    EXPECT_EQ(sgd.bytes_averaged(), (5 + 6 + 3) * 4);  // the long buffer is not sent
    after[static_cast<size_t>(r)] = {w.detach().clone(), b.detach().clone(), mean.clone(),
                                     count.clone()};
  });
  // The mean of (r + 1) over 4 ranks is 2.5; of r, 1.5.
  for (int r = 0; r < kWorld; ++r) {
    const auto& got = after[static_cast<size_t>(r)];
    EXPECT_TRUE(torch::equal(got[0], local_value(0, 5, 0).mul(2.5))) << "rank " << r << got[0];
    EXPECT_TRUE(torch::equal(got[1], local_value(0, 6, 0).mul(2.5).view({2, 3}))) << got[1];
    EXPECT_TRUE(torch::equal(got[2], torch::full({3}, 1.5f))) << got[2];
    EXPECT_TRUE(torch::equal(got[3], torch::full({1}, 10 + r, torch::kLong))) << got[3];
  }
}

TEST(LocalSgd, TheNesterovOuterStepIsTorchSgdOnTheMeanChangeSinceTheLastAveraging) {
  constexpr int kWorld = 2, kPeriods = 4;
  constexpr double kLr = 0.7, kMomentum = 0.9;
  const at::Tensor start = torch::linspace(-1, 1, 6);
  std::vector<at::Tensor> models(kWorld);
  // The reference: torch.optim.SGD(nesterov) on a copy of the model, whose gradient each period
  // is the outer gradient anchor - mean (the mean of what the ranks hold before averaging).
  at::Tensor reference = start.clone().requires_grad_(true);
  torch::optim::SGD outer({reference},
                          torch::optim::SGDOptions(kLr).momentum(kMomentum).nesterov(true));
  std::vector<at::Tensor> wants;
  for (int period = 0; period < kPeriods; ++period) {
    // Each rank moves by -(r + 1)(period + 1) * 0.01 * (1..6): the mean move is -1.5x that.
    at::Tensor mean_move = local_value(0, 6, period).mul(-0.01 * 1.5);
    const at::Tensor anchor = reference.detach().clone();
    reference.mutable_grad() = anchor - (anchor + mean_move);
    outer.step();
    wants.push_back(reference.detach().clone());
  }
  std::vector<std::vector<at::Tensor>> got(kWorld);
  test::on_gloo_ranks(kWorld, [&](GlooCommunicator& comm) {
    const int r = comm.rank();
    at::Tensor w = start.clone().requires_grad_(true);
    LocalSgd sgd({{"w", w}}, {}, comm,
                 {/*every_steps=*/1, 0, spec::OuterOptimizer::kNesterov, kLr, kMomentum});
    for (int period = 0; period < kPeriods; ++period) {
      sgd.start_local_step();  // the first one takes the anchor
      {
        torch::NoGradGuard no_grad;
        w.add_(local_value(r, 6, period).mul(-0.01));
      }
      sgd.synchronize();
      got[static_cast<size_t>(r)].push_back(w.detach().clone());
    }
  });
  for (int period = 0; period < kPeriods; ++period) {
    const at::Tensor& want = wants[static_cast<size_t>(period)];
    for (int r = 0; r < kWorld; ++r) {
      const at::Tensor& have = got[static_cast<size_t>(r)][static_cast<size_t>(period)];
      // Within float rounding of the ranks' mean (0.01 is not exact), and equal on both ranks.
      EXPECT_TRUE(torch::allclose(have, want, 1e-6, 1e-6))
          << "period " << period << " rank " << r << "\n got " << have << "\nwant " << want;
      EXPECT_TRUE(torch::equal(have, got[0][static_cast<size_t>(period)]));
    }
  }
  // Not plain averaging: the outer step moves the model further than the mean did.
  EXPECT_FALSE(torch::allclose(wants.back(), start + local_value(0, 6, 0).mul(-0.015), 1e-3));
}

TEST(LocalSgd, ItsStateComesBackAndAStrangeEntryIsRefusedByName) {
  test::on_gloo_ranks(1, [&](GlooCommunicator& comm) {
    at::Tensor w = torch::ones({4}).requires_grad_(true);
    const LocalSgdOptions nesterov{2, 0, spec::OuterOptimizer::kNesterov, 0.7, 0.9};
    LocalSgd a({{"w", w}}, {}, comm, nesterov);
    a.start_local_step();
    a.start_local_step();
    a.synchronize();
    a.start_local_step();
    const NamedTensors saved = a.state();
    ASSERT_EQ(saved.size(), 3u);  // local_steps, anchor.w, momentum.w
    EXPECT_EQ(saved[0].first, "local_steps");
    EXPECT_EQ(saved[0].second.item<int64_t>(), 1);

    LocalSgd b({{"w", w}}, {}, comm, nesterov);
    b.load_state(saved);
    EXPECT_EQ(b.local_steps(), 1);
    const NamedTensors back = b.state();
    ASSERT_EQ(back.size(), saved.size());
    for (size_t i = 0; i < saved.size(); ++i) {
      EXPECT_EQ(back[i].first, saved[i].first);
      EXPECT_TRUE(torch::equal(back[i].second, saved[i].second)) << saved[i].first;
    }
    LocalSgd c({{"w", w}}, {}, comm, nesterov);
    c.load_state(saved, {"local_steps", "momentum"});  // the resume ablation's skip
    EXPECT_EQ(c.local_steps(), 0);
    EXPECT_EQ(c.state().size(), 2u);  // local_steps and the anchor

    NamedTensors strange = saved;
    strange.emplace_back("anchor.conv9.weight", torch::ones({4}));
    try {
      b.load_state(strange);
      ADD_FAILURE() << "an entry for no parameter was accepted";
    } catch (const rt::Error& e) {
      EXPECT_NE(std::string(e.what()).find("anchor.conv9.weight"), std::string::npos) << e.what();
    }
    NamedTensors misshapen = {{"anchor.w", torch::ones({5})}};
    EXPECT_THROW(b.load_state(misshapen), rt::Error);
    EXPECT_THROW(LocalSgd({{"w", w}}, {}, comm, {0, 0, spec::OuterOptimizer::kNone, 0.7, 0.9}),
                 rt::Error);
  });
}

// The anchor and outer momentum come back laid out as their parameters (channels_last here), not
// as the checkpoint file holds them (contiguous).
TEST(LocalSgd, RestoredStateTakesItsParametersLayout) {
  test::on_gloo_ranks(1, [&](GlooCommunicator& comm) {
    at::Tensor w =
        torch::zeros({2, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    LocalSgd sgd(
        {{"w", w}}, {}, comm,
        {/*every_steps=*/2, /*warmup_steps=*/0, spec::OuterOptimizer::kNesterov, 0.7, 0.9});
    sgd.load_state({{"local_steps", at::scalar_tensor(1, at::kLong)},
                    {"anchor.w", torch::ones({2, 3, 2, 2})},
                    {"momentum.w", torch::ones({2, 3, 2, 2})}});
    for (const auto& [name, t] : sgd.state()) {
      if (t.dim() > 0) {
        EXPECT_EQ(t.strides(), w.strides()) << name;
      }
    }
  });
}

TEST(LocalSgd, AverageStateTakesTheMeanOfFloatsAndTheFirstOfIntegers) {
  const NamedTensors a = {{"w", torch::full({2}, 1.0f)}, {"n", torch::full({1}, 3, torch::kLong)}};
  const NamedTensors b = {{"w", torch::full({2}, 2.0f)}, {"n", torch::full({1}, 3, torch::kLong)}};
  const NamedTensors c = {{"w", torch::full({2}, 6.0f)}, {"n", torch::full({1}, 3, torch::kLong)}};
  const NamedTensors mean = average_state({a, b, c});
  ASSERT_EQ(mean.size(), 2u);
  EXPECT_TRUE(torch::equal(mean[0].second, torch::full({2}, 3.0f))) << mean[0].second;
  EXPECT_TRUE(torch::equal(mean[1].second, torch::full({1}, 3, torch::kLong)));
  const NamedTensors other = {{"v", torch::full({2}, 1.0f)}, {"n", torch::ones({1}, torch::kLong)}};
  EXPECT_THROW(average_state({a, other}), rt::Error);
}

}  // namespace
}  // namespace hpctrain::train
