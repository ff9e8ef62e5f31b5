#include "model/fused_bn_cudnn.hpp"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Exceptions.h>
#include <ATen/cudnn/Descriptors.h>
#include <ATen/cudnn/Handle.h>
#include <ATen/cudnn/Types.h>
#include <c10/cuda/CUDAGuard.h>

// cuDNN 9 marks the batch-norm Ex calls deprecated (in favour of its graph API) but keeps them;
// they are the ones with the fused activation and add.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace hpctrain::model::cudnn_bn {
namespace {

constexpr auto kMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

cudnnBatchNormOps_t ops_of(bool residual) {
  return residual ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
}

// Descriptors of one call: x-like tensors (x, residual, y, their gradients: one layout), the
// per-channel float tensors (weight, bias, statistics), ReLU.
struct Descriptors {
  at::native::TensorDescriptor data, channel;
  at::native::ActivationDescriptor relu;

  Descriptors(const at::Tensor& x, const at::Tensor& weight) {
    data.set(x, at::MemoryFormat::ChannelsLast, 4);
    channel.set(weight.view({1, weight.numel(), 1, 1}), 4);
    relu.set(CUDNN_ACTIVATION_RELU);
  }
};

at::Tensor bytes(size_t size, const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(size)}, like.options().dtype(at::kByte));
}

}  // namespace

bool applies(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
             bool training) {
  const bool half = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  // The residual in any layout (the zero-padded shortcut's is NCHW): forward() lays it out.
  const bool residual_ok = !residual.defined() || (residual.scalar_type() == x.scalar_type() &&
                                                   residual.device() == x.device());
  return training && x.is_cuda() && x.dim() == 4 && half &&
         x.is_contiguous(at::MemoryFormat::ChannelsLast) && residual_ok &&
         weight.scalar_type() == at::kFloat && weight.device() == x.device();
}

Forward forward(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                const at::Tensor& bias, at::Tensor& running_mean, at::Tensor& running_var,
                double momentum, double eps) {
  TORCH_CHECK(running_mean.is_contiguous() && running_var.is_contiguous() &&
                  running_mean.scalar_type() == at::kFloat &&
                  running_var.scalar_type() == at::kFloat,
              "fused batch norm (cuDNN): running statistics must be contiguous float tensors");
  const c10::cuda::CUDAGuard guard(x.device());
  cudnnHandle_t handle = at::native::getCudnnHandle();
  const Descriptors d(x, weight);
  const bool add = residual.defined();
  const auto ops = ops_of(add);
  const at::Tensor w = weight.contiguous(), b = bias.contiguous();
  const at::Tensor z = add ? residual.contiguous(at::MemoryFormat::ChannelsLast) : at::Tensor();
  Forward f;
  f.y = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  f.mean = at::empty({weight.numel()}, weight.options());
  f.invstd = at::empty({weight.numel()}, weight.options());
  size_t workspace_size = 0, reserve_size = 0;
  AT_CUDNN_CHECK(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
      handle, kMode, ops, d.data.desc(), add ? d.data.desc() : nullptr, d.data.desc(),
      d.channel.desc(), d.relu.desc(), &workspace_size));
  AT_CUDNN_CHECK(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
      handle, kMode, ops, d.relu.desc(), d.data.desc(), &reserve_size));
  const at::Tensor workspace = bytes(workspace_size, x);
  f.reserve = bytes(reserve_size, x);
  const float one = 1.0f, zero = 0.0f;
  AT_CUDNN_CHECK(cudnnBatchNormalizationForwardTrainingEx(
      handle, kMode, ops, &one, &zero, d.data.desc(), x.data_ptr(), add ? d.data.desc() : nullptr,
      add ? z.data_ptr() : nullptr, d.data.desc(), f.y.data_ptr(), d.channel.desc(), w.data_ptr(),
      b.data_ptr(), momentum, running_mean.data_ptr(), running_var.data_ptr(), eps,
      f.mean.data_ptr(), f.invstd.data_ptr(), d.relu.desc(), workspace.data_ptr(), workspace_size,
      f.reserve.data_ptr(), reserve_size));
  return f;
}

Backward backward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& dy, bool residual,
                  const at::Tensor& weight, const at::Tensor& bias, const Forward& saved,
                  double eps) {
  const c10::cuda::CUDAGuard guard(x.device());
  cudnnHandle_t handle = at::native::getCudnnHandle();
  const Descriptors d(x, weight);
  const auto ops = ops_of(residual);
  const at::Tensor g = dy.to(x.scalar_type()).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = weight.contiguous(), b = bias.contiguous();
  Backward out;
  out.dx = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  if (residual) out.dresidual = at::empty_like(x, at::MemoryFormat::ChannelsLast);
  out.dweight = at::empty_like(w);
  out.dbias = at::empty_like(w);
  size_t workspace_size = 0;
  AT_CUDNN_CHECK(cudnnGetBatchNormalizationBackwardExWorkspaceSize(
      handle, kMode, ops, d.data.desc(), d.data.desc(), d.data.desc(),
      residual ? d.data.desc() : nullptr, d.data.desc(), d.channel.desc(), d.relu.desc(),
      &workspace_size));
  const at::Tensor workspace = bytes(workspace_size, x);
  const float one = 1.0f, zero = 0.0f;
  AT_CUDNN_CHECK(cudnnBatchNormalizationBackwardEx(
      handle, kMode, ops, &one, &zero, &one, &zero, d.data.desc(), x.data_ptr(), d.data.desc(),
      y.data_ptr(), d.data.desc(), g.data_ptr(), residual ? d.data.desc() : nullptr,
      residual ? out.dresidual.data_ptr() : nullptr, d.data.desc(), out.dx.data_ptr(),
      d.channel.desc(), w.data_ptr(), b.data_ptr(), out.dweight.data_ptr(), out.dbias.data_ptr(),
      eps, saved.mean.data_ptr(), saved.invstd.data_ptr(), d.relu.desc(), workspace.data_ptr(),
      workspace_size, saved.reserve.data_ptr(), saved.reserve.numel()));
  return out;
}

}  // namespace hpctrain::model::cudnn_bn
