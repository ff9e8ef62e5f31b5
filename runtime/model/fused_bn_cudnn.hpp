// The cuDNN path of the fused batch norm (model/fused_bn.hpp): one kernel forward
// (cudnnBatchNormalizationForwardTrainingEx) and one backward (cudnnBatchNormalizationBackwardEx)
// with CUDNN_BATCHNORM_OPS_BN_ACTIVATION (BN+ReLU) or BN_ADD_ACTIVATION (BN+add+ReLU), mode
// CUDNN_BATCHNORM_SPATIAL_PERSISTENT as torch picks it for channels_last training
// (../shared/design/gpu-speed.md step 2). Built only in the CUDA build with the torch wheel's
// cuDNN (HPCTRAIN_WITH_CUDNN, cmake/torch.cmake); the reference runs wherever this does not
// apply. The running statistics are cuDNN's, which torch's own cuDNN batch norm relies on for
// torch.nn.BatchNorm2d's semantics: `momentum` as the exponential average factor, the unbiased
// variance into running_var; the saved inverse standard deviation is 1 / sqrt(var + eps).
// Thread safety: as any ATen op (cuDNN's handle is torch's, per thread and device, on the
// current stream).
#pragma once

#include <ATen/core/Tensor.h>

namespace hpctrain::model::cudnn_bn {

// Whether the cuDNN kernels take these inputs: training, a CUDA 4-D channels_last fp16 or
// bfloat16 `x`, `residual` (when defined) of x's type on its device, float weight.
bool applies(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
             bool training);

struct Forward {
  at::Tensor y;        // x's type, channels_last
  at::Tensor mean;     // float, C: the batch's
  at::Tensor invstd;   // float, C
  at::Tensor reserve;  // cuDNN's reserve space (ReLU's mask), for backward
};
// y = relu(bn(x) + residual); running_mean and running_var updated in place.
Forward forward(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                const at::Tensor& bias, at::Tensor& running_mean, at::Tensor& running_var,
                double momentum, double eps);

struct Backward {
  at::Tensor dx, dresidual, dweight, dbias;  // dresidual undefined without a residual
};
Backward backward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& dy, bool residual,
                  const at::Tensor& weight, const at::Tensor& bias, const Forward& saved,
                  double eps);

}  // namespace hpctrain::model::cudnn_bn
