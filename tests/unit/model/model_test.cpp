// The networks: configuration checks, output shapes, parameter counts (torchvision's published
// numbers), names, initialisation and the CIFAR option-A shortcut. The names-against-torchvision
// and logits checks are in interop_check.py.
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/utils.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "model/model.hpp"
#include "model/weights.hpp"

namespace hpctrain::model {
namespace {

ModelConfig config(Arch arch, Stem stem, int64_t in_channels, int64_t num_classes) {
  ModelConfig c;
  c.arch = arch;
  c.stem = stem;
  c.in_channels = in_channels;
  c.num_classes = num_classes;
  return c;
}

int64_t parameter_count(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

std::string validation_error(const ModelConfig& c) {
  try {
    c.validate();
  } catch (const rt::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, NamesRoundTrip) {
  ASSERT_EQ(all_archs().size(), 11u);
  for (const Arch arch : all_archs()) {
    const auto parsed = spec::parse_choice<Arch>(spec::name_of(arch));
    ASSERT_TRUE(parsed.has_value()) << spec::name_of(arch);
    EXPECT_EQ(*parsed, arch);
  }
  EXPECT_EQ(spec::name_of(Arch::kResNet110), "resnet110");
  EXPECT_FALSE(spec::parse_choice<Arch>("resnet19").has_value());
  EXPECT_FALSE(spec::parse_choice<Arch>("ResNet18").has_value());
  EXPECT_EQ(spec::parse_choice<Stem>("cifar"), Stem::kCifar);
  EXPECT_EQ(spec::name_of(Stem::kImageNet), "imagenet");
  EXPECT_FALSE(spec::parse_choice<Stem>("mnist").has_value());
  EXPECT_TRUE(is_cifar_resnet(Arch::kResNet56));
  EXPECT_FALSE(is_cifar_resnet(Arch::kResNet50));
}

TEST(ModelConfig, ZeroValuesAreRejected) {
  const std::string error = validation_error(ModelConfig{});
  EXPECT_NE(error.find("num_classes must be at least 2, got 0"), std::string::npos) << error;
  EXPECT_NE(error.find("in_channels must be 1..4, got 0"), std::string::npos) << error;
}

TEST(ModelConfig, ReportsEveryProblemAtOnce) {
  ModelConfig c = config(Arch::kResNet20, Stem::kImageNet, 5, 1);
  c.freeze = {"layer1", "", "fc."};
  const std::string error = validation_error(c);
  EXPECT_NE(error.find("num_classes must be at least 2, got 1"), std::string::npos) << error;
  EXPECT_NE(error.find("in_channels must be 1..4, got 5"), std::string::npos) << error;
  EXPECT_NE(error.find("resnet20 is a CIFAR ResNet"), std::string::npos) << error;
  EXPECT_NE(error.find("freeze prefix \"\""), std::string::npos) << error;
  EXPECT_NE(error.find("freeze prefix \"fc.\""), std::string::npos) << error;
  EXPECT_EQ(error.find("\"layer1\""), std::string::npos) << error;
}

TEST(ModelConfig, AlexNetHasNoCifarStem) {
  EXPECT_NE(validation_error(config(Arch::kAlexNet, Stem::kCifar, 3, 10)).find("alexnet"),
            std::string::npos);
  EXPECT_EQ(validation_error(config(Arch::kAlexNet, Stem::kImageNet, 3, 10)), "");
  EXPECT_EQ(validation_error(config(Arch::kResNet18, Stem::kCifar, 1, 10)), "");
}

TEST(ModelConfig, BuildModelValidates) {
  EXPECT_THROW(build_model(config(Arch::kResNet18, Stem::kImageNet, 3, 1)), rt::Error);
}

// Builds the network, checks its parameter count (torchvision's; for the CIFAR networks the
// reference in interop_check.py) and its output shape at each image side with 3 channels, and
// for small images also with 1 channel, where only the stem convolution's weight changes. 224px
// runs batch 1 and 3 channels only, to keep the test cheap.
void expect_shapes(Arch arch, Stem stem, int64_t num_classes, int64_t parameters,
                   const std::vector<int64_t>& sides) {
  torch::manual_seed(0);
  const auto net = build_model(config(arch, stem, /*in_channels=*/3, num_classes));
  EXPECT_EQ(parameter_count(*net), parameters);
  net->eval();
  torch::NoGradGuard no_grad;
  for (const int64_t side : sides) {
    const int64_t batch = side >= 224 ? 1 : 2;
    const torch::Tensor y = net->forward(torch::randn({batch, 3, side, side}));
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{batch, num_classes})) << side << "px";
    EXPECT_TRUE(y.isfinite().all().item<bool>());
  }
  if (sides.front() >= 224) return;
  const auto grey = build_model(config(arch, stem, /*in_channels=*/1, num_classes));
  const auto stem_weight = state_dict(*grey)["conv1.weight"];
  EXPECT_EQ(parameter_count(*grey), parameters - 2 * stem_weight.numel());
  grey->eval();
  const torch::Tensor y = grey->forward(torch::randn({2, 1, 28, 28}));
  EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, num_classes}));
}

TEST(Shapes, ResNet18) { expect_shapes(Arch::kResNet18, Stem::kImageNet, 1000, 11689512, {224}); }
TEST(Shapes, ResNet34) { expect_shapes(Arch::kResNet34, Stem::kImageNet, 1000, 21797672, {224}); }
TEST(Shapes, ResNet50) { expect_shapes(Arch::kResNet50, Stem::kImageNet, 1000, 25557032, {224}); }
TEST(Shapes, ResNet101) { expect_shapes(Arch::kResNet101, Stem::kImageNet, 1000, 44549160, {224}); }
TEST(Shapes, ResNet152) { expect_shapes(Arch::kResNet152, Stem::kImageNet, 1000, 60192808, {224}); }
TEST(Shapes, AlexNet) { expect_shapes(Arch::kAlexNet, Stem::kImageNet, 1000, 61100840, {224}); }
// torchvision's resnet18 with a 3x3 conv1 and 10 classes.
TEST(Shapes, ResNet18Cifar) {
  expect_shapes(Arch::kResNet18, Stem::kCifar, 10, 11173962, {28, 32});
}
TEST(Shapes, ResNet20) { expect_shapes(Arch::kResNet20, Stem::kCifar, 10, 269722, {28, 32}); }
TEST(Shapes, ResNet32) { expect_shapes(Arch::kResNet32, Stem::kCifar, 10, 464154, {28, 32}); }
TEST(Shapes, ResNet44) { expect_shapes(Arch::kResNet44, Stem::kCifar, 10, 658586, {28, 32}); }
TEST(Shapes, ResNet56) { expect_shapes(Arch::kResNet56, Stem::kCifar, 10, 853018, {28, 32}); }
TEST(Shapes, ResNet110) { expect_shapes(Arch::kResNet110, Stem::kCifar, 10, 1727962, {28, 32}); }

std::vector<std::string> keys(const StateDict& sd) { return sd.keys(); }

TEST(Names, ResNet50FollowsTorchvision) {
  const auto net = build_model(config(Arch::kResNet50, Stem::kImageNet, 3, 1000));
  const auto names = keys(state_dict(*net));
  ASSERT_EQ(names.size(), 320u);  // len(torchvision.models.resnet50().state_dict())
  const std::vector<std::string> head = {
      "conv1.weight",          "bn1.weight",         "bn1.bias",
      "bn1.running_mean",      "bn1.running_var",    "bn1.num_batches_tracked",
      "layer1.0.conv1.weight", "layer1.0.bn1.weight"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 8), head);
  const auto sd = state_dict(*net);
  EXPECT_EQ(sd["layer1.0.downsample.0.weight"].sizes(), (std::vector<int64_t>{256, 64, 1, 1}));
  EXPECT_TRUE(sd.contains("layer1.0.downsample.1.running_var"));
  EXPECT_FALSE(sd.contains("layer1.1.downsample.0.weight"));
  // v1.5: the stride is on the 3x3 convolution; the 1x1s keep the resolution.
  EXPECT_EQ(sd["layer2.0.conv2.weight"].sizes(), (std::vector<int64_t>{128, 128, 3, 3}));
  EXPECT_EQ(sd["layer4.2.conv3.weight"].sizes(), (std::vector<int64_t>{2048, 512, 1, 1}));
  EXPECT_EQ(sd["bn1.num_batches_tracked"].scalar_type(), torch::kLong);
  EXPECT_EQ(names.back(), "fc.bias");
  EXPECT_EQ(sd["fc.weight"].sizes(), (std::vector<int64_t>{1000, 2048}));
  EXPECT_EQ(net->stem_conv(), "conv1");
  EXPECT_EQ(net->head(), "fc");
}

TEST(Names, AlexNetFollowsTorchvision) {
  const auto net = build_model(config(Arch::kAlexNet, Stem::kImageNet, 1, 10));
  EXPECT_EQ(
      keys(state_dict(*net)),
      (std::vector<std::string>{
          "features.0.weight", "features.0.bias", "features.3.weight", "features.3.bias",
          "features.6.weight", "features.6.bias", "features.8.weight", "features.8.bias",
          "features.10.weight", "features.10.bias", "classifier.1.weight", "classifier.1.bias",
          "classifier.4.weight", "classifier.4.bias", "classifier.6.weight", "classifier.6.bias"}));
  const auto sd = state_dict(*net);
  EXPECT_EQ(sd["features.0.weight"].sizes(), (std::vector<int64_t>{64, 1, 11, 11}));
  EXPECT_EQ(sd["classifier.1.weight"].sizes(), (std::vector<int64_t>{4096, 9216}));
  EXPECT_EQ(net->head(), "classifier.6");
}

TEST(Names, CifarResNetHasNoShortcutParameters) {
  const auto net = build_model(config(Arch::kResNet20, Stem::kCifar, 3, 10));
  const auto sd = state_dict(*net);
  EXPECT_EQ(sd.size(), 6u + 9 * 2 * 6 + 2);  // stem conv+bn, 9 blocks of 2 conv+bn, fc
  for (const auto& name : sd.keys()) EXPECT_EQ(name.find("downsample"), std::string::npos) << name;
  EXPECT_EQ(sd["conv1.weight"].sizes(), (std::vector<int64_t>{16, 3, 3, 3}));
  EXPECT_EQ(sd["layer3.2.conv2.weight"].sizes(), (std::vector<int64_t>{64, 64, 3, 3}));
  EXPECT_EQ(sd["fc.weight"].sizes(), (std::vector<int64_t>{10, 64}));
}

TEST(Init, HeNormalConvolutionsAndIdentityBatchNorm) {
  torch::manual_seed(7);
  const auto sd = state_dict(*build_model(config(Arch::kResNet18, Stem::kImageNet, 3, 1000)));
  // kaiming_normal_(fan_out, relu): std = sqrt(2 / (out_channels * kernel area)).
  const torch::Tensor w = sd["layer4.1.conv2.weight"];  // 512x512x3x3: 2.4M samples
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(w.std().item<double>() / std::sqrt(2.0 / (512 * 9)), 1.0, 0.01);
  const torch::Tensor stem = sd["conv1.weight"];  // fan_out = 64 * 49, not fan_in = 3 * 49
  EXPECT_NEAR(stem.std().item<double>() / std::sqrt(2.0 / (64 * 49)), 1.0, 0.05);
  EXPECT_TRUE(torch::equal(sd["layer2.0.bn1.weight"], torch::ones({128})));
  EXPECT_TRUE(torch::equal(sd["layer2.0.bn1.bias"], torch::zeros({128})));
  EXPECT_TRUE(torch::equal(sd["layer2.0.downsample.1.running_var"], torch::ones({128})));
  // fc keeps nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const double bound = 1 / std::sqrt(512.0);
  EXPECT_LE(sd["fc.weight"].abs().max().item<double>(), bound);
  EXPECT_GT(sd["fc.weight"].abs().max().item<double>(), 0.99 * bound);
}

TEST(Init, SeededByTheCaller) {
  const auto cifar = config(Arch::kResNet20, Stem::kCifar, 3, 10);
  torch::manual_seed(3);
  const auto a = state_dict(*build_model(cifar));
  torch::manual_seed(3);
  const auto b = state_dict(*build_model(cifar));
  torch::manual_seed(4);
  const auto c = state_dict(*build_model(cifar));
  for (const auto& name : a.keys()) EXPECT_TRUE(torch::equal(a[name], b[name])) << name;
  EXPECT_FALSE(torch::equal(a["layer1.0.conv1.weight"], c["layer1.0.conv1.weight"]));
}

TEST(Init, ZeroInitResidualZeroesTheLastBatchNormOfEachBlock) {
  for (const Arch arch : {Arch::kResNet18, Arch::kResNet50, Arch::kResNet20}) {
    ModelConfig c = config(arch, is_cifar_resnet(arch) ? Stem::kCifar : Stem::kImageNet, 3, 10);
    c.zero_init_residual = true;
    const auto sd = state_dict(*build_model(c));
    const std::string last = arch == Arch::kResNet50 ? ".bn3.weight" : ".bn2.weight";
    int zeroed = 0;
    for (const auto& item : sd) {
      const std::string& name = item.key();
      const bool is_bn_weight = name.find(".bn") != std::string::npos && name.size() > 7 &&
                                name.compare(name.size() - 7, 7, ".weight") == 0;
      if (!is_bn_weight) continue;
      const bool ends_block = name.size() > last.size() &&
                              name.compare(name.size() - last.size(), last.size(), last) == 0;
      if (ends_block) ++zeroed;
      EXPECT_EQ(item.value().abs().sum().item<double>() == 0, ends_block) << name;
    }
    EXPECT_EQ(zeroed, arch == Arch::kResNet18 ? 8 : arch == Arch::kResNet50 ? 16 : 9);
    EXPECT_TRUE(torch::equal(sd["bn1.weight"], torch::ones_like(sd["bn1.weight"])));
  }
}

// Option A: with the residual branch zeroed, a stage is its shortcut. For non-negative input the
// stride-2 stage of a CIFAR ResNet gives every other pixel, with 8 zero channels on each side.
TEST(CifarShortcut, SubsamplesAndZeroPadsChannels) {
  ModelConfig c = config(Arch::kResNet20, Stem::kCifar, 3, 10);
  c.zero_init_residual = true;
  const auto net = build_model(c);
  net->eval();
  auto layer2 = net->named_children()["layer2"]->as<torch::nn::Sequential>();
  ASSERT_NE(layer2, nullptr);
  const torch::Tensor x = torch::rand({2, 16, 28, 28});
  torch::NoGradGuard no_grad;
  const torch::Tensor y = layer2->forward(x);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 32, 14, 14}));
  using torch::indexing::None;
  using torch::indexing::Slice;
  const torch::Tensor expected =
      x.index({Slice(), Slice(), Slice(None, None, 2), Slice(None, None, 2)});
  EXPECT_TRUE(torch::allclose(y.slice(1, 8, 24), expected, /*rtol=*/0, /*atol=*/1e-6));
  EXPECT_EQ(y.slice(1, 0, 8).abs().max().item<float>(), 0.0f);
  EXPECT_EQ(y.slice(1, 24, 32).abs().max().item<float>(), 0.0f);
}

TEST(Modes, DropoutOnlyInTraining) {
  torch::manual_seed(1);
  const auto net = build_model(config(Arch::kAlexNet, Stem::kImageNet, 3, 10));
  const torch::Tensor x = torch::randn({1, 3, 64, 64});
  torch::NoGradGuard no_grad;
  net->eval();
  EXPECT_TRUE(torch::equal(net->forward(x), net->forward(x)));
  net->train();
  EXPECT_FALSE(torch::equal(net->forward(x), net->forward(x)));
}

}  // namespace
}  // namespace hpctrain::model
