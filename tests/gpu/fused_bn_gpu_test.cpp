// The fused batch norm's cuDNN kernels (model/fused_bn_cudnn.hpp) on a real GPU, against the
// op's reference (model/fused_bn.hpp) computed on the CPU in double from the same values: the
// output, every gradient and the running statistics, for BN+ReLU and BN+add+ReLU, fp16 and
// bfloat16, channels_last; and a ResNet-20 step with model.fused_bn on the GPU against the same
// network on torch's modules. Exits 77 (skipped) without a CUDA device; label gpu
// (scripts/gpu-check.sh runs them).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "model/fused_bn.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"

namespace hpctrain::model {
namespace {

struct Inputs {
  at::Tensor x, residual, weight, bias, running_mean, running_var;
};

Inputs make_inputs(at::ScalarType type, bool residual, const at::Device& device) {
  at::manual_seed(3);
  Inputs in;
  const auto cl = at::MemoryFormat::ChannelsLast;
  in.x = (at::randn({16, 64, 14, 14}) * 2 + 0.3).to(device, type).contiguous(cl);
  if (residual) in.residual = at::randn({16, 64, 14, 14}).to(device, type).contiguous(cl);
  in.weight = (at::rand({64}) + 0.5).to(device);
  in.bias = (at::randn({64}) * 0.3).to(device);
  in.running_mean = at::randn({64}).to(device);
  in.running_var = (at::rand({64}) + 0.5).to(device);
  return in;
}

struct Outputs {
  at::Tensor y, dx, dresidual, dweight, dbias, running_mean, running_var;
};

// The op on `in` converted to `type` on `device` (the reference: double on the CPU), with a
// fixed upstream gradient; everything back on the CPU in double.
Outputs run(const Inputs& in, const at::Device& device, at::ScalarType type) {
  const auto move = [&](const at::Tensor& t, at::ScalarType as) {
    return t.defined() ? t.to(device, as).contiguous(at::MemoryFormat::ChannelsLast).detach()
                       : at::Tensor();
  };
  const auto stat = type == at::kDouble ? at::kDouble : at::kFloat;
  auto x = move(in.x, type).set_requires_grad(true);
  auto residual =
      in.residual.defined() ? move(in.residual, type).set_requires_grad(true) : at::Tensor();
  auto weight = in.weight.to(device, stat).detach().set_requires_grad(true);
  auto bias = in.bias.to(device, stat).detach().set_requires_grad(true);
  Outputs o;
  o.running_mean = in.running_mean.to(device, stat);
  o.running_var = in.running_var.to(device, stat);
  const auto y = bn_add_relu(x, residual, weight, bias, o.running_mean, o.running_var, BnOptions{});
  const auto upstream = at::linspace(-1, 1, y.numel(), at::kDouble).view(y.sizes()).to(device);
  (y.to(at::kDouble) * upstream).sum().backward();
  const auto back = [](const at::Tensor& t) {
    return t.defined() ? t.detach().to(at::kCPU, at::kDouble) : at::Tensor();
  };
  return {back(y),
          back(x.grad()),
          back(residual.defined() ? residual.grad() : at::Tensor()),
          back(weight.grad()),
          back(bias.grad()),
          back(o.running_mean),
          back(o.running_var)};
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.defined(), want.defined()) << what;
  if (!got.defined()) return;
  const double err = (got - want).abs().max().item<double>();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE(err, tol * scale) << what << ": off by " << err << " (scale " << scale << ")";
}

TEST(FusedBnGpu, CudnnTakesChannelsLastHalfAndBfloat16InTraining) {
  const at::Device cuda(at::kCUDA);
  const Inputs half = make_inputs(at::kHalf, true, cuda);
  EXPECT_TRUE(bn_add_relu_on_cudnn(half.x, half.residual, half.weight, true));
  EXPECT_TRUE(bn_add_relu_on_cudnn(half.x, at::Tensor(), half.weight, true));
  const Inputs bf16 = make_inputs(at::kBFloat16, false, cuda);
  EXPECT_TRUE(bn_add_relu_on_cudnn(bf16.x, at::Tensor(), bf16.weight, true));
  EXPECT_FALSE(bn_add_relu_on_cudnn(half.x, half.residual, half.weight, false)) << "eval";
  EXPECT_FALSE(bn_add_relu_on_cudnn(half.x.contiguous(), at::Tensor(), half.weight, true))
      << "NCHW";
  EXPECT_FALSE(bn_add_relu_on_cudnn(half.x.to(at::kFloat), at::Tensor(), half.weight, true))
      << "fp32";
}

// Within the input type's rounding: fp16 keeps 11 bits, bfloat16 8; the statistics are float in
// both.
TEST(FusedBnGpu, CudnnMatchesTheReference) {
  const at::Device cuda(at::kCUDA);
  for (const auto type : {at::kHalf, at::kBFloat16}) {
    for (const bool residual : {true, false}) {
      SCOPED_TRACE(std::string(c10::toString(type)) + (residual ? " BN+add+ReLU" : " BN+ReLU"));
      const Inputs in = make_inputs(type, residual, cuda);
      ASSERT_TRUE(bn_add_relu_on_cudnn(in.x, in.residual, in.weight, true));
      const Outputs gpu = run(in, cuda, type);
      const Outputs ref = run(in, at::Device(at::kCPU), at::kDouble);
      const double tol = type == at::kHalf ? 4e-3 : 3e-2;
      expect_close(gpu.y, ref.y, tol, "output");
      expect_close(gpu.dx, ref.dx, tol, "input's gradient");
      expect_close(gpu.dresidual, ref.dresidual, tol, "residual's gradient");
      expect_close(gpu.dweight, ref.dweight, tol, "weight's gradient");
      expect_close(gpu.dbias, ref.dbias, tol, "bias's gradient");
      expect_close(gpu.running_mean, ref.running_mean, 1e-4, "running mean");
      expect_close(gpu.running_var, ref.running_var, 1e-4, "running variance");
    }
  }
}

// One training forward and backward of ResNet-20 on the GPU, channels_last, under fp16 autocast:
// model.fused_bn against torch's modules, from the same weights.
TEST(FusedBnGpu, ResNetStepWithFusedBnMatchesTorchsModules) {
  const at::Device cuda(at::kCUDA);
  at::Tensor out[2], grad[2];
  for (const bool fused : {false, true}) {
    ModelConfig c;
    c.arch = Arch::kResNet20;
    c.stem = Stem::kCifar;
    c.in_channels = 3;
    c.num_classes = 10;
    c.fused_bn = fused;
    at::manual_seed(7);
    auto net = build_model(c);
    net->to(cuda);
    to_channels_last(*net);
    net->train();
    at::manual_seed(8);
    const auto x = at::randn({64, 3, 32, 32}).to(cuda).contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor y;
    {
      at::autocast::set_autocast_enabled(at::kCUDA, true);
      at::autocast::set_autocast_dtype(at::kCUDA, at::kHalf);
      y = net->forward(x);
      at::autocast::set_autocast_enabled(at::kCUDA, false);
      at::autocast::clear_cache();
    }
    y.to(at::kFloat).square().mean().backward();
    out[fused] = y.detach().to(at::kCPU, at::kDouble);
    grad[fused] = net->named_parameters()["conv1.weight"].grad().to(at::kCPU, at::kDouble);
  }
  expect_close(out[1], out[0], 2e-2, "logits");
  expect_close(grad[1], grad[0], 5e-2, "stem's gradient");
}

}  // namespace
}  // namespace hpctrain::model

namespace {

// As tests/gpu/gpu_lib.sh rules: where `nvidia-smi -L` lists a GPU, a test that cannot use CUDA
// fails (a skip there would hide the breakage it is for); only where none is listed does it skip.
bool gpu_listed() {
  FILE* smi = ::popen("nvidia-smi -L 2>/dev/null", "r");
  if (smi == nullptr) return false;
  char line[512];
  bool listed = false;
  while (std::fgets(line, sizeof line, smi) != nullptr) {
    listed = listed || std::strncmp(line, "GPU ", 4) == 0;
  }
  ::pclose(smi);
  return listed;
}

}  // namespace

int main(int argc, char** argv) {
  if (!torch::cuda::is_available()) {
    if (gpu_listed()) {
      std::cout << "FAIL: fused_bn_gpu_tests: nvidia-smi lists a GPU but torch sees no CUDA "
                   "device (a CPU build of torch, or a driver too old for it)\n";
      return 1;
    }
    std::cout << "fused_bn_gpu_tests: no CUDA device: skipped\n";
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
