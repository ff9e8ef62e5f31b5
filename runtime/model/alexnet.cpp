// torchvision's AlexNet (the "one weird trick" variant torchvision ships: 64/192/384/256/256
// channels, adaptive 6x6 pooling before the classifier). Layers are appended one at a time, not
// passed to Sequential's variadic constructor, because each constructor draws from the global
// generator and the order in which C++ evaluates arguments is unspecified.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/networks.hpp"

namespace hpctrain::model {
namespace {

namespace nn = torch::nn;

constexpr int64_t kPooledSide = 6;
constexpr int64_t kFeatureChannels = 256;
constexpr int64_t kHidden = 4096;
constexpr double kDropout = 0.5;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding));
}

nn::ReLU relu() { return nn::ReLU(nn::ReLUOptions(/*inplace=*/true)); }

nn::MaxPool2d max_pool() {
  return nn::MaxPool2d(nn::MaxPool2dOptions(/*kernel_size=*/3).stride(2));
}

class AlexNet : public Classifier {
 public:
  explicit AlexNet(const ModelConfig& config) : Classifier("AlexNet") {
    nn::Sequential features;
    features->push_back(conv(config.in_channels, 64, /*kernel=*/11, /*stride=*/4, /*padding=*/2));
    features->push_back(relu());
    features->push_back(max_pool());
    features->push_back(conv(64, 192, /*kernel=*/5, /*stride=*/1, /*padding=*/2));
    features->push_back(relu());
    features->push_back(max_pool());
    features->push_back(conv(192, 384, /*kernel=*/3, /*stride=*/1, /*padding=*/1));
    features->push_back(relu());
    features->push_back(conv(384, 256, /*kernel=*/3, /*stride=*/1, /*padding=*/1));
    features->push_back(relu());
    features->push_back(conv(256, kFeatureChannels, /*kernel=*/3, /*stride=*/1, /*padding=*/1));
    features->push_back(relu());
    features->push_back(max_pool());
    features_ = register_module("features", features);
    avgpool_ = register_module(
        "avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({kPooledSide, kPooledSide})));
    nn::Sequential classifier;
    classifier->push_back(nn::Dropout(kDropout));
    classifier->push_back(nn::Linear(kFeatureChannels * kPooledSide * kPooledSide, kHidden));
    classifier->push_back(relu());
    classifier->push_back(nn::Dropout(kDropout));
    classifier->push_back(nn::Linear(kHidden, kHidden));
    classifier->push_back(relu());
    classifier->push_back(nn::Linear(kHidden, config.num_classes));
    classifier_ = register_module("classifier", classifier);
    // torchvision keeps PyTorch's default initialisation here, which libtorch's matches.
  }

  torch::Tensor forward(torch::Tensor x) override {
    return classifier_->forward(avgpool_(features_->forward(x)).flatten(/*start_dim=*/1));
  }

  std::string stem_conv() const override { return "features.0"; }
  std::string head() const override { return "classifier.6"; }

 private:
  nn::Sequential features_{nullptr};
  nn::AdaptiveAvgPool2d avgpool_{nullptr};
  nn::Sequential classifier_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_alexnet(const ModelConfig& config) {
  return std::make_shared<AlexNet>(config);
}

}  // namespace hpctrain::model
