// Batch norm, an optional residual add and ReLU as one autograd op, y = relu(bn(x) + residual):
// what a ResNet block ends with (BN+ReLU after its first convolutions, BN+add+ReLU after its
// last), and what cuDNN runs as one kernel forward and one backward
// (cudnnBatchNormalizationForwardTrainingEx / BackwardEx with CUDNN_BATCHNORM_OPS_BN_ACTIVATION /
// BN_ADD_ACTIVATION; ../shared/design/gpu-speed.md step 2) instead of the three torch runs each
// way. On a CUDA device, in training, for channels_last fp16 and bfloat16 inputs (what autocast
// hands over) it runs cuDNN's fused kernels (model/fused_bn_cudnn.hpp; the CUDA build with the
// torch wheel's cuDNN). Everywhere else it runs its reference: the same signature and saved
// state (the batch's mean and inverse standard deviation, the output for ReLU's mask), computed
// from ATen with the backward written out, so that the GPU op is checked against it and the CPU
// trains through the same code.
// Semantics are torch.nn.BatchNorm2d's followed by `+ residual` and ReLU: statistics over N, H and
// W in float whatever the input's type (fp16 and bf16 inputs, float weight, bias and running
// statistics), biased variance to normalise, unbiased variance into running_var, running
// statistics updated in place by `momentum` in training; the running statistics used in eval. The
// output has the input's type and memory format (channels_last stays channels_last).
// Thread safety: as any ATen op.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace hpctrain::model {

struct BnOptions {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
};

// y = relu(batch_norm(x) + residual); `residual` (x's shape and type) may be undefined for
// BN+ReLU. `running_mean` and `running_var` (float, C) are updated in place when training.
at::Tensor bn_add_relu(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                       const at::Tensor& bias, at::Tensor& running_mean, at::Tensor& running_var,
                       const BnOptions& options);

// Whether bn_add_relu runs cuDNN's kernels on these inputs (else its reference).
bool bn_add_relu_on_cudnn(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                          bool training);

}  // namespace hpctrain::model
