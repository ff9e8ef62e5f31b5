#include "model/fused_bn.hpp"

#include <torch/autograd.h>

#ifdef HPCTRAIN_WITH_CUDNN
#include "model/fused_bn_cudnn.hpp"
#endif

namespace hpctrain::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A per-channel vector (C) shaped to broadcast over N, C, H, W.
at::Tensor per_channel(const at::Tensor& t) { return t.view({1, -1, 1, 1}); }

// The type the statistics and the arithmetic are in: float for float, half and bfloat16 inputs
// (as cuDNN and torch's CPU kernels accumulate), double for double (the gradient check's).
at::ScalarType math_type(const at::Tensor& x) {
  return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// The forward of both ops below in ATen; saves what backward() needs.
at::Tensor reference_forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& weight, const at::Tensor& bias,
                             at::Tensor* running_mean, at::Tensor* running_var,
                             const BnOptions& o) {
  const auto xm = x.to(math_type(x));
  at::Tensor mean, invstd;
  if (o.training) {
    const int64_t n = x.numel() / x.size(1);
    TORCH_CHECK(n > 1, "bn_add_relu: training needs more than one value per channel, got ",
                x.sizes());
    mean = xm.mean({0, 2, 3});
    const auto var = (xm - per_channel(mean)).square().mean({0, 2, 3});
    invstd = (var + o.eps).rsqrt();
    running_mean->mul_(1 - o.momentum).add_(mean.to(running_mean->scalar_type()), o.momentum);
    running_var->mul_(1 - o.momentum)
        .add_((var * (static_cast<double>(n) / static_cast<double>(n - 1)))
                  .to(running_var->scalar_type()),
              o.momentum);
  } else {
    mean = running_mean->to(xm.scalar_type());
    invstd = (running_var->to(xm.scalar_type()) + o.eps).rsqrt();
  }
  auto z = (xm - per_channel(mean)) * per_channel(invstd * weight.to(xm.scalar_type())) +
           per_channel(bias.to(xm.scalar_type()));
  if (residual.defined()) z = z + residual.to(xm.scalar_type());
  auto y = z.relu().to(x.scalar_type()).contiguous(x.suggest_memory_format());
  ctx->save_for_backward({x, weight, mean, invstd, y});
  ctx->saved_data["training"] = o.training;
  return y;
}

// With z = xhat * weight + bias (+ residual), xhat = (x - mean) * invstd and y = relu(z):
// dz = dy where y > 0; d(bias) = sum dz, d(weight) = sum dz * xhat, d(residual) = dz, and
// dx = weight * invstd * (dz - mean(dz) - xhat * mean(dz * xhat)) in training (the batch's
// statistics depend on x), weight * invstd * dz in eval. Sums and means over N, H and W.
// {dx, dz (the residual's, in x's type), d(weight), d(bias)}.
variable_list reference_backward(AutogradContext* ctx, const at::Tensor& dy) {
  const auto saved = ctx->get_saved_variables();
  const auto &x = saved[0], &weight = saved[1], &mean = saved[2], &invstd = saved[3], &y = saved[4];
  const auto type = mean.scalar_type();
  const auto dz = dy.to(type) * (y > 0).to(type);
  const auto xhat = (x.to(type) - per_channel(mean)) * per_channel(invstd);
  const auto dbias = dz.sum({0, 2, 3});
  const auto dweight = (dz * xhat).sum({0, 2, 3});
  const auto scale = per_channel(invstd * weight.to(type));
  at::Tensor dx;
  if (ctx->saved_data["training"].toBool()) {
    const double n = static_cast<double>(x.numel() / x.size(1));
    dx = scale * (dz - per_channel(dbias / n) - xhat * per_channel(dweight / n));
  } else {
    dx = scale * dz;
  }
  const auto format = x.suggest_memory_format();
  return {dx.to(x.scalar_type()).contiguous(format), dz.to(x.scalar_type()).contiguous(format),
          dweight.to(weight.scalar_type()), dbias.to(weight.scalar_type())};
}

// The forward of both ops below: cuDNN's fused kernels where they apply (CUDA, training,
// channels_last fp16/bfloat16; model/fused_bn_cudnn.hpp), else the reference above.
at::Tensor forward_impl(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual,
                        const at::Tensor& weight, const at::Tensor& bias, at::Tensor* running_mean,
                        at::Tensor* running_var, const BnOptions& o) {
#ifdef HPCTRAIN_WITH_CUDNN
  if (cudnn_bn::applies(x, residual, weight, o.training)) {
    const cudnn_bn::Forward f = cudnn_bn::forward(x, residual, weight, bias, *running_mean,
                                                  *running_var, o.momentum, o.eps);
    ctx->save_for_backward({x, weight, bias, f.y, f.mean, f.invstd, f.reserve});
    ctx->saved_data["cudnn"] = true;
    ctx->saved_data["residual"] = residual.defined();
    ctx->saved_data["eps"] = o.eps;
    return f.y;
  }
#endif
  ctx->saved_data["cudnn"] = false;
  return reference_forward(ctx, x, residual, weight, bias, running_mean, running_var, o);
}

variable_list backward_impl(AutogradContext* ctx, const at::Tensor& dy) {
#ifdef HPCTRAIN_WITH_CUDNN
  if (ctx->saved_data["cudnn"].toBool()) {
    const auto s = ctx->get_saved_variables();
    const cudnn_bn::Forward saved{s[3], s[4], s[5], s[6]};
    const cudnn_bn::Backward b =
        cudnn_bn::backward(s[0], s[3], dy, ctx->saved_data["residual"].toBool(), s[1], s[2], saved,
                           ctx->saved_data["eps"].toDouble());
    return {b.dx, b.dresidual, b.dweight, b.dbias};
  }
#endif
  return reference_backward(ctx, dy);
}

// Two ops, as an autograd Function takes no undefined tensor among its inputs.
class BnAddRelu : public torch::autograd::Function<BnAddRelu> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& residual,
                            const at::Tensor& weight, const at::Tensor& bias,
                            at::Tensor* running_mean, at::Tensor* running_var, const BnOptions& o) {
    return forward_impl(ctx, x, residual, weight, bias, running_mean, running_var, o);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto g = backward_impl(ctx, grads[0]);
    return {g[0], g[1], g[2], g[3], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

class BnRelu : public torch::autograd::Function<BnRelu> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, at::Tensor* running_mean,
                            at::Tensor* running_var, const BnOptions& o) {
    return forward_impl(ctx, x, at::Tensor(), weight, bias, running_mean, running_var, o);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto g = backward_impl(ctx, grads[0]);
    return {g[0], g[2], g[3], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool bn_add_relu_on_cudnn(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                          bool training) {
#ifdef HPCTRAIN_WITH_CUDNN
  return cudnn_bn::applies(x, residual, weight, training);
#else
  (void)x, (void)residual, (void)weight, (void)training;
  return false;
#endif
}

at::Tensor bn_add_relu(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight,
                       const at::Tensor& bias, at::Tensor& running_mean, at::Tensor& running_var,
                       const BnOptions& options) {
  TORCH_CHECK(x.dim() == 4, "bn_add_relu: want an N, C, H, W input, got ", x.sizes());
  TORCH_CHECK(!residual.defined() || residual.sizes() == x.sizes(),
              "bn_add_relu: the residual's shape ", residual.sizes(), " is not the input's ",
              x.sizes());
  if (!residual.defined()) {
    return BnRelu::apply(x, weight, bias, &running_mean, &running_var, options);
  }
  return BnAddRelu::apply(x, residual, weight, bias, &running_mean, &running_var, options);
}

}  // namespace hpctrain::model
