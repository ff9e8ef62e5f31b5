// Batch norm, an optional residual add and ReLU as one autograd op, y = relu(bn(x) + residual):
// what a ResNet block ends with (BN+ReLU after its first convolutions, BN+add+ReLU after its
// last), and what cuDNN runs as one kernel forward and one backward
// (cudnnBatchNormalizationForwardTrainingEx / BackwardEx with CUDNN_BATCHNORM_OPS_BN_ACTIVATION /
// BN_ADD_ACTIVATION; ../shared/design/gpu-speed.md step 2) instead of the three torch runs each
// way. This is the op's reference: the same signature and saved state as the cuDNN path (the
// batch's mean and inverse standard deviation, the output for ReLU's mask), computed from ATen
// with the backward written out, so that the GPU op is checked against it and the CPU trains
// through the same code.
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

}  // namespace hpctrain::model
