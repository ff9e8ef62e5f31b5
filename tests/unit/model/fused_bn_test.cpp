// The fused batch norm + add + ReLU op's reference (model/fused_bn.hpp) against what it replaces:
// torch's batch_norm, the add and ReLU, composed and differentiated by autograd. Forward, every
// gradient and the running statistics, in training and eval, with and without the residual,
// NCHW and channels_last, fp32 and bfloat16; and its written-out backward against central
// differences in double.
#include "model/fused_bn.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"

namespace hpctrain::model {
namespace {

struct Case {
  at::Tensor x, residual, weight, bias, running_mean, running_var;
};

// Channels 5, and values that make some outputs negative before ReLU (the mask matters).
Case make_case(at::ScalarType type, bool residual, bool channels_last, int64_t seed) {
  at::manual_seed(seed);
  Case c;
  const auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  const auto math = type == at::kDouble ? at::kDouble : at::kFloat;
  c.x = (at::randn({4, 5, 6, 3}, at::kDouble) * 2 + 0.5).to(type).contiguous(format);
  if (residual) c.residual = at::randn({4, 5, 6, 3}, at::kDouble).to(type).contiguous(format);
  c.weight = (at::rand({5}, at::kDouble) + 0.5).to(math);
  c.bias = (at::randn({5}, at::kDouble) * 0.3).to(math);
  c.running_mean = at::randn({5}, at::kDouble).to(math);
  c.running_var = (at::rand({5}, at::kDouble) + 0.5).to(math);
  return c;
}

struct Result {
  at::Tensor y, dx, dresidual, dweight, dbias, running_mean, running_var;
};

// Runs `op` on a copy of `c` with gradients on, backward with a fixed upstream gradient.
template <class Op>
Result run(const Case& c, const BnOptions& o, Op op) {
  auto x = c.x.clone().set_requires_grad(true);
  auto residual = c.residual.defined() ? c.residual.clone().set_requires_grad(true) : at::Tensor();
  auto weight = c.weight.clone().set_requires_grad(true);
  auto bias = c.bias.clone().set_requires_grad(true);
  Result r;
  r.running_mean = c.running_mean.clone();
  r.running_var = c.running_var.clone();
  r.y = op(x, residual, weight, bias, r.running_mean, r.running_var, o);
  const auto upstream = at::linspace(-1, 1, r.y.numel(), at::kDouble).view(r.y.sizes());
  (r.y.to(at::kDouble) * upstream).sum().backward();
  r.dx = x.grad();
  r.dresidual = residual.defined() ? residual.grad() : at::Tensor();
  r.dweight = weight.grad();
  r.dbias = bias.grad();
  return r;
}

at::Tensor composed(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                    const at::Tensor& bias, at::Tensor& running_mean, at::Tensor& running_var,
                    const BnOptions& o) {
  auto z = at::batch_norm(x, weight, bias, running_mean, running_var, o.training, o.momentum, o.eps,
                          /*cudnn_enabled=*/false);
  if (residual.defined()) z = z + residual;
  return z.relu();
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const auto g = got.to(at::kDouble), w = want.to(at::kDouble);
  const double err = (g - w).abs().max().item<double>();
  const double scale = std::max(1.0, w.abs().max().item<double>());
  EXPECT_LE(err, tol * scale) << what << ": off by " << err;
}

// `in_float`: the composed ops on the same values in float (what the fused op computes inside:
// bfloat16 batch norm, add and ReLU each rounded would put ReLU's mask elsewhere near zero).
void expect_matches_torch(at::ScalarType type, bool residual, bool channels_last, bool training,
                          double tol, bool in_float = false) {
  SCOPED_TRACE(std::string(c10::toString(type)) + (residual ? " with residual" : "") +
               (channels_last ? " channels_last" : "") + (training ? " training" : " eval"));
  const Case c = make_case(type, residual, channels_last, 11);
  const BnOptions o{training, 0.1, 1e-5};
  const Result ours = run(c, o, bn_add_relu);
  Case reference = c;
  if (in_float) {
    reference.x = c.x.to(at::kFloat);
    if (c.residual.defined()) reference.residual = c.residual.to(at::kFloat);
  }
  const Result theirs = run(reference, o, composed);
  expect_close(ours.y, theirs.y, tol, "output");
  EXPECT_EQ(ours.y.scalar_type(), type);
  EXPECT_EQ(ours.dx.scalar_type(), type);
  EXPECT_EQ(ours.y.is_contiguous(at::MemoryFormat::ChannelsLast), channels_last);
  expect_close(ours.dx, theirs.dx, tol, "input's gradient");
  expect_close(ours.dresidual, theirs.dresidual, tol, "residual's gradient");
  expect_close(ours.dweight, theirs.dweight, tol, "weight's gradient");
  expect_close(ours.dbias, theirs.dbias, tol, "bias's gradient");
  expect_close(ours.running_mean, theirs.running_mean, tol, "running mean");
  expect_close(ours.running_var, theirs.running_var, tol, "running variance");
  if (training) {
    EXPECT_FALSE(ours.running_mean.equal(c.running_mean)) << "training updates the statistics";
  } else {
    EXPECT_TRUE(ours.running_var.equal(c.running_var)) << "eval leaves them";
  }
}

TEST(FusedBn, MatchesBatchNormAddReluInFp32) {
  for (const bool residual : {true, false}) {
    for (const bool channels_last : {false, true}) {
      for (const bool training : {true, false}) {
        expect_matches_torch(at::kFloat, residual, channels_last, training, 2e-5);
      }
    }
  }
}

TEST(FusedBn, MatchesBatchNormAddReluInBfloat16WithFloatStatistics) {
  // bfloat16 inputs as autocast hands them over, float weight and statistics: within bfloat16's
  // rounding (8 bits of mantissa) of the output and of the gradient coming back.
  for (const bool training : {true, false}) {
    expect_matches_torch(at::kBFloat16, true, true, training, 2e-2, /*in_float=*/true);
  }
}

// sum(y * upstream) as a function of one input, for central differences.
double objective(const Case& c, const BnOptions& o) {
  auto rm = c.running_mean.clone(), rv = c.running_var.clone();
  const auto y = bn_add_relu(c.x, c.residual, c.weight, c.bias, rm, rv, o);
  const auto upstream = at::linspace(-1, 1, y.numel(), at::kDouble).view(y.sizes());
  return (y * upstream).sum().item<double>();
}

TEST(FusedBn, ItsBackwardAgreesWithCentralDifferencesInDouble) {
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "eval");
    const Case c = make_case(at::kDouble, true, false, 5);
    const BnOptions o{training, 0.1, 1e-5};
    const Result r = run(c, o, bn_add_relu);
    const std::vector<std::pair<at::Tensor, at::Tensor>> inputs = {
        {c.x, r.dx}, {c.residual, r.dresidual}, {c.weight, r.dweight}, {c.bias, r.dbias}};
    for (const auto& [input, grad] : inputs) {
      auto flat = input.view(-1);
      const auto g = grad.contiguous().view(-1);
      for (int64_t i = 0; i < flat.numel(); i += 7) {  // every 7th element: enough, and quick
        const double h = 1e-6, at_i = flat[i].item<double>();
        flat[i] = at_i + h;
        const double up = objective(c, o);
        flat[i] = at_i - h;
        const double down = objective(c, o);
        flat[i] = at_i;
        EXPECT_NEAR(g[i].item<double>(), (up - down) / (2 * h), 1e-5) << "element " << i;
      }
    }
  }
}

TEST(FusedBn, RefusesWhatItCannotNormalise) {
  Case c = make_case(at::kFloat, false, false, 1);
  const BnOptions o;
  auto one = c.x.slice(0, 0, 1).slice(2, 0, 1).slice(3, 0, 1);
  EXPECT_THROW(bn_add_relu(one, {}, c.weight, c.bias, c.running_mean, c.running_var, o),
               c10::Error);
  EXPECT_THROW(
      bn_add_relu(c.x, c.x.slice(0, 0, 2), c.weight, c.bias, c.running_mean, c.running_var, o),
      c10::Error);
}

// A ResNet built with model.fused_bn against the same network on torch's modules, from the same
// seed: the same parameters and buffers by name (the state dict does not change, so weights load
// in PyTorch as before), and in training the same output, gradients, running statistics and
// batch count; in eval the same output. Each block kind and shortcut: ResNet-20 (basic blocks,
// zero-padded shortcut, channels_last too), ResNet-18 (projection shortcut, imagenet stem),
// ResNet-50 (bottlenecks).
struct Net {
  std::shared_ptr<Classifier> model;
  at::Tensor train_out, eval_out;
  std::vector<std::pair<std::string, at::Tensor>> grads, buffers;
};

Net run_net(Arch arch, Stem stem, bool fused, bool channels_last, int64_t side,
            at::ScalarType type) {
  ModelConfig c;
  c.arch = arch;
  c.stem = stem;
  c.in_channels = 3;
  c.num_classes = 10;
  c.fused_bn = fused;
  at::manual_seed(7);
  Net n;
  n.model = build_model(c);
  const auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  n.model->to(type);
  if (channels_last) to_channels_last(*n.model);
  at::manual_seed(8);
  const auto x = at::randn({4, 3, side, side}, type).contiguous(format);
  n.model->train();
  n.train_out = n.model->forward(x);
  const auto upstream = at::linspace(-1, 1, n.train_out.numel(), type).view(n.train_out.sizes());
  (n.train_out * upstream).sum().backward();
  for (const auto& p : n.model->named_parameters()) n.grads.emplace_back(p.key(), p.value().grad());
  n.model->eval();
  {
    at::NoGradGuard no_grad;
    n.eval_out = n.model->forward(x);
  }
  for (const auto& b : n.model->named_buffers()) n.buffers.emplace_back(b.key(), b.value());
  return n;
}

TEST(FusedBn, ResNetsWithItEqualTorchsModulesAndKeepTheirStateDict) {
  // In double the two differ by rounding only, whatever the depth; in float the batch norm's
  // backward (a difference of means) loses digits with each layer, which a deep network on small
  // images shows in its first layers' gradients (ResNet-50 at 64x64, batch 4: up to 1 %), so
  // float is checked on ResNet-20, the deep ones in double.
  struct NetCase {
    Arch arch;
    Stem stem;
    bool channels_last;
    int64_t side;
    at::ScalarType type;
    double tol;
  };
  for (const NetCase& k :
       {NetCase{Arch::kResNet20, Stem::kCifar, false, 16, at::kFloat, 1e-4},
        NetCase{Arch::kResNet20, Stem::kCifar, true, 16, at::kFloat, 1e-4},
        NetCase{Arch::kResNet20, Stem::kCifar, true, 16, at::kDouble, 1e-9},
        NetCase{Arch::kResNet18, Stem::kImageNet, false, 32, at::kDouble, 1e-9},
        NetCase{Arch::kResNet50, Stem::kImageNet, false, 64, at::kDouble, 1e-9}}) {
    SCOPED_TRACE(std::string(spec::name_of(k.arch)) + (k.channels_last ? " channels_last " : " ") +
                 c10::toString(k.type));
    const Net torch_bn = run_net(k.arch, k.stem, false, k.channels_last, k.side, k.type);
    const Net fused = run_net(k.arch, k.stem, true, k.channels_last, k.side, k.type);
    const auto a = torch_bn.model->named_parameters(), b = fused.model->named_parameters();
    ASSERT_EQ(a.keys(), b.keys());
    ASSERT_EQ(torch_bn.buffers.size(), fused.buffers.size());
    expect_close(fused.train_out, torch_bn.train_out, k.tol, "training output");
    expect_close(fused.eval_out, torch_bn.eval_out, k.tol, "eval output");
    for (size_t i = 0; i < torch_bn.grads.size(); ++i) {
      expect_close(fused.grads[i].second, torch_bn.grads[i].second, 10 * k.tol,
                   torch_bn.grads[i].first.c_str());
    }
    int64_t counts = 0;
    for (size_t i = 0; i < torch_bn.buffers.size(); ++i) {
      const auto& [name, want] = torch_bn.buffers[i];
      ASSERT_EQ(fused.buffers[i].first, name);
      if (name.size() > 19 && name.substr(name.size() - 19) == "num_batches_tracked") {
        EXPECT_TRUE(fused.buffers[i].second.equal(want)) << name;
        EXPECT_EQ(want.item<int64_t>(), 1) << name;
        ++counts;
      } else {
        expect_close(fused.buffers[i].second, want, k.tol, name.c_str());
      }
    }
    EXPECT_GT(counts, 0);
  }
}

TEST(FusedBn, AlexNetHasNoBatchNormToFuse) {
  ModelConfig c;
  c.arch = Arch::kAlexNet;
  c.stem = Stem::kImageNet;
  c.in_channels = 3;
  c.num_classes = 10;
  c.fused_bn = true;
  try {
    c.validate();
    ADD_FAILURE() << "alexnet with fused_bn accepted";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused_bn: alexnet has no batch norm"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hpctrain::model
