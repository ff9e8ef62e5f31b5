// The fused batch norm + add + ReLU op's reference (model/fused_bn.hpp) against what it replaces:
// torch's batch_norm, the add and ReLU, composed and differentiated by autograd. Forward, every
// gradient and the running statistics, in training and eval, with and without the residual,
// NCHW and channels_last, fp32 and bfloat16; and its written-out backward against central
// differences in double.
#include "model/fused_bn.hpp"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <vector>

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

}  // namespace
}  // namespace hpctrain::model
