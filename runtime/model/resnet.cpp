// One ResNet class for torchvision's ImageNet networks and the CIFAR networks of He et al. 2016:
// they differ only in block kind, stage widths and depths, stem, and shortcut, all of which a
// Layout names. Modules are constructed in torchvision's order (a stage's downsample before its
// first block's convolutions, as _make_layer does) because each constructor draws from the global
// generator: equal seeds then give torchvision's weights exactly.
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/fused_bn.hpp"
#include "model/networks.hpp"

namespace hpctrain::model {
namespace {

namespace nn = torch::nn;
using torch::indexing::None;
using torch::indexing::Slice;

enum class BlockKind { kBasic, kBottleneck };

// How a block's input joins its output when the block changes the shape: torchvision's 1x1
// convolution + BN ("option B", modules downsample.0 and downsample.1), or He et al.'s CIFAR
// "option A", stride-2 subsampling with zero-padded channels, which has no parameters.
enum class Shortcut { kProjection, kZeroPad };

struct Layout {
  BlockKind block;
  std::vector<int64_t> depths;  // blocks per stage
  std::vector<int64_t> widths;  // planes per stage (block outputs are planes * expansion)
  Shortcut shortcut;
};

constexpr int64_t kBottleneckExpansion = 4;

Layout imagenet_layout(BlockKind block, std::vector<int64_t> depths) {
  return {block, std::move(depths), {64, 128, 256, 512}, Shortcut::kProjection};
}

// 6n + 2 layers: the stem conv, three stages of n two-conv blocks, the classifier.
Layout cifar_layout(int64_t depth) {
  const int64_t n = (depth - 2) / 6;
  return {BlockKind::kBasic, {n, n, n}, {16, 32, 64}, Shortcut::kZeroPad};
}

Layout layout_of(Arch arch) {
  switch (arch) {
    case Arch::kResNet18:
      return imagenet_layout(BlockKind::kBasic, {2, 2, 2, 2});
    case Arch::kResNet34:
      return imagenet_layout(BlockKind::kBasic, {3, 4, 6, 3});
    case Arch::kResNet50:
      return imagenet_layout(BlockKind::kBottleneck, {3, 4, 6, 3});
    case Arch::kResNet101:
      return imagenet_layout(BlockKind::kBottleneck, {3, 4, 23, 3});
    case Arch::kResNet152:
      return imagenet_layout(BlockKind::kBottleneck, {3, 8, 36, 3});
    case Arch::kResNet20:
      return cifar_layout(20);
    case Arch::kResNet32:
      return cifar_layout(32);
    case Arch::kResNet44:
      return cifar_layout(44);
    case Arch::kResNet56:
      return cifar_layout(56);
    case Arch::kResNet110:
      return cifar_layout(110);
    case Arch::kAlexNet:
      break;
  }
  throw std::logic_error("make_resnet: not a ResNet");
}

// torchvision's conv1x1/conv3x3 (and the 7x7 stem): "same" padding, no bias since BN follows.
nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// relu(bn(x) + residual) (`residual` may be undefined): torch's module, the add and ReLU, or with
// `fused` one op (model/fused_bn.hpp) on the module's own parameters and buffers, counting the
// batch in num_batches_tracked as the module does, so that the state dict is the same.
torch::Tensor bn_relu(nn::BatchNorm2d& bn, const torch::Tensor& x, const torch::Tensor& residual,
                      bool fused) {
  if (!fused) {
    torch::Tensor out = bn(x);
    if (residual.defined()) out += residual;
    return out.relu_();
  }
  const auto& o = bn->options;
  if (!o.momentum() || !o.track_running_stats() || !o.affine()) {
    throw std::logic_error("fused batch norm: only affine batch norm with running statistics");
  }
  BnOptions fused_options;
  fused_options.training = bn->is_training();
  fused_options.momentum = *o.momentum();
  fused_options.eps = o.eps();
  if (fused_options.training) bn->num_batches_tracked += 1;
  return bn_add_relu(x, residual, bn->weight, bn->bias, bn->running_mean, bn->running_var,
                     fused_options);
}

// torchvision's BasicBlock and Bottleneck (v1.5: the stride sits on the 3x3 convolution).
class ResidualBlockImpl : public nn::Module {
 public:
  ResidualBlockImpl(BlockKind kind, int64_t in, int64_t planes, int64_t stride, Shortcut shortcut,
                    bool fused_bn)
      : nn::Module(kind == BlockKind::kBasic ? "BasicBlock" : "Bottleneck"),
        out_(kind == BlockKind::kBasic ? planes : planes * kBottleneckExpansion),
        fused_(fused_bn) {
    const bool reshapes = stride != 1 || in != out_;
    nn::Sequential downsample{nullptr};
    if (reshapes && shortcut == Shortcut::kProjection) {
      downsample = nn::Sequential();
      downsample->push_back(conv(in, out_, /*kernel=*/1, stride));
      downsample->push_back(nn::BatchNorm2d(out_));
    }
    if (kind == BlockKind::kBasic) {
      conv1_ = register_module("conv1", conv(in, planes, /*kernel=*/3, stride));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", conv(planes, planes, /*kernel=*/3, /*stride=*/1));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
    } else {
      conv1_ = register_module("conv1", conv(in, planes, /*kernel=*/1, /*stride=*/1));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", conv(planes, planes, /*kernel=*/3, stride));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
      conv3_ = register_module("conv3", conv(planes, out_, /*kernel=*/1, /*stride=*/1));
      bn3_ = register_module("bn3", nn::BatchNorm2d(out_));
    }
    if (downsample) {
      downsample_ = register_module("downsample", downsample);
    } else if (reshapes) {
      subsample_ = stride;
      pad_before_ = (out_ - in) / 2;
      pad_after_ = out_ - in - pad_before_;
    }
  }

  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = bn_relu(bn1_, conv1_(x), {}, fused_);
    if (conv3_) out = bn_relu(bn2_, conv2_(out), {}, fused_);
    nn::BatchNorm2d& last = conv3_ ? bn3_ : bn2_;
    torch::Tensor pre = conv3_ ? conv3_(out) : conv2_(out);
    return bn_relu(last, pre, shortcut(x), fused_);
  }

  int64_t out_channels() const { return out_; }
  // The BN whose output joins the shortcut; zero_init_residual zeroes its weight so that each
  // block starts as the identity (Goyal et al. 2017).
  nn::BatchNorm2d& last_bn() { return conv3_ ? bn3_ : bn2_; }

 private:
  torch::Tensor shortcut(const torch::Tensor& x) {
    if (downsample_) return downsample_->forward(x);
    if (subsample_ == 1 && pad_before_ + pad_after_ == 0) return x;
    // Option A as in the common PyTorch reproduction of the CIFAR ResNets: every other pixel,
    // new channels zero on both sides of the old ones.
    const torch::Tensor sub =
        x.index({Slice(), Slice(), Slice(None, None, subsample_), Slice(None, None, subsample_)});
    return torch::constant_pad_nd(sub, {0, 0, 0, 0, pad_before_, pad_after_});
  }

  int64_t out_;
  bool fused_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};
  int64_t subsample_ = 1, pad_before_ = 0, pad_after_ = 0;
};

class ResNet : public Classifier {
 public:
  explicit ResNet(const ModelConfig& config) : Classifier("ResNet"), fused_(config.fused_bn) {
    const Layout layout = layout_of(config.arch);
    const int64_t stem_width = layout.widths.front();
    if (config.stem == Stem::kImageNet) {
      conv1_ = register_module("conv1",
                               conv(config.in_channels, stem_width, /*kernel=*/7, /*stride=*/2));
    } else {
      conv1_ = register_module("conv1",
                               conv(config.in_channels, stem_width, /*kernel=*/3, /*stride=*/1));
    }
    bn1_ = register_module("bn1", nn::BatchNorm2d(stem_width));
    // The cifar stem has no max-pool (torchvision users write `model.maxpool = nn.Identity()`).
    if (config.stem == Stem::kImageNet) {
      maxpool_ = register_module(
          "maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(/*kernel_size=*/3).stride(2).padding(1)));
    }
    int64_t in = stem_width;
    for (size_t s = 0; s < layout.depths.size(); ++s) {
      // Every stage but the first halves the resolution in its first block.
      const int64_t stage_stride = s == 0 ? 1 : 2;
      nn::Sequential stage;
      for (int64_t b = 0; b < layout.depths[s]; ++b) {
        auto block = std::make_shared<ResidualBlockImpl>(layout.block, in, layout.widths[s],
                                                         b == 0 ? stage_stride : 1, layout.shortcut,
                                                         config.fused_bn);
        in = block->out_channels();
        blocks_.push_back(block);
        stage->push_back(block);
      }
      stages_.push_back(register_module("layer" + std::to_string(s + 1), stage));
    }
    avgpool_ = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc_ = register_module("fc", nn::Linear(in, config.num_classes));
    initialise(config.zero_init_residual);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = bn_relu(bn1_, conv1_(x), {}, fused_);
    if (maxpool_) x = maxpool_(x);
    for (auto& stage : stages_) x = stage->forward(x);
    return fc_(avgpool_(x).flatten(/*start_dim=*/1));
  }

  std::string stem_conv() const override { return "conv1"; }
  std::string head() const override { return "fc"; }

 private:
  // torchvision's ResNet.__init__ loop, in module order: He-normal convolutions for ReLU
  // networks, BN as the identity, Linear left at its default (which libtorch's matches).
  void initialise(bool zero_init_residual) {
    for (const auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, /*a=*/0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
        nn::init::ones_(bn->weight);
        nn::init::zeros_(bn->bias);
      }
    }
    if (!zero_init_residual) return;
    for (const auto& block : blocks_) nn::init::zeros_(block->last_bn()->weight);
  }

  bool fused_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  nn::MaxPool2d maxpool_{nullptr};
  std::vector<nn::Sequential> stages_;
  std::vector<std::shared_ptr<ResidualBlockImpl>> blocks_;
  nn::AdaptiveAvgPool2d avgpool_{nullptr};
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_resnet(const ModelConfig& config) {
  return std::make_shared<ResNet>(config);
}

}  // namespace hpctrain::model
