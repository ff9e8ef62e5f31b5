#include "model/config.hpp"

#include <string>
#include <utility>

#include "common/error.hpp"
#include "spec/spec.hpp"

namespace hpctrain::model {
namespace {

// Channels a first convolution accepts: grey, grey + alpha, RGB, RGBA (the dataset format's
// limit, data::kMaxChannels).
constexpr int64_t kMaxInChannels = 4;

}  // namespace

const std::vector<Arch>& all_archs() {
  static const std::vector<Arch> archs = [] {
    std::vector<Arch> out;
    for (size_t i = 0; i < spec::Names<Arch>::kValues.size(); ++i) {
      out.push_back(static_cast<Arch>(i));
    }
    return out;
  }();
  return archs;
}

void ModelConfig::validate() const {
  std::vector<std::string> problems;
  if (static_cast<size_t>(arch) >= spec::Names<Arch>::kValues.size()) {
    HPCTRAIN_THROW(rt::Error, "invalid model configuration: unknown architecture value");
  }
  const std::string arch_str(spec::name_of(arch));
  if (num_classes < 2) {
    problems.push_back("num_classes must be at least 2, got " + std::to_string(num_classes));
  }
  if (in_channels < 1 || in_channels > kMaxInChannels) {
    problems.push_back("in_channels must be 1.." + std::to_string(kMaxInChannels) + ", got " +
                       std::to_string(in_channels));
  }
  if (is_cifar_resnet(arch) && stem != Stem::kCifar) {
    problems.push_back(arch_str + " is a CIFAR ResNet: its stem is always cifar, got " +
                       std::string(spec::name_of(stem)));
  }
  if (arch == Arch::kAlexNet && stem != Stem::kImageNet) {
    problems.push_back("alexnet has only the imagenet stem, got " +
                       std::string(spec::name_of(stem)));
  }
  if (arch == Arch::kAlexNet && fused_bn) {
    problems.push_back(
        "fused_bn: alexnet has no batch norm to fuse (model.fused_bn is for ResNets)");
  }
  for (const auto& prefix : freeze) {
    if (prefix.empty() || prefix.front() == '.' || prefix.back() == '.') {
      problems.push_back("freeze prefix \"" + prefix +
                         "\" is not a parameter-name prefix such as \"conv1\" or \"layer1.0\"");
    }
  }
  if (problems.empty()) return;
  std::string message = "invalid model configuration (" + arch_str + "):";
  for (const auto& problem : problems) message += "\n  " + problem;
  HPCTRAIN_THROW(rt::Error, message);
}

ModelConfig model_config_from_spec(const spec::Spec& spec, int64_t in_channels) {
  ModelConfig c;
  c.arch = spec.model.arch;
  c.stem = is_cifar_resnet(c.arch)    ? Stem::kCifar
           : c.arch == Arch::kAlexNet ? Stem::kImageNet
                                      : spec.model.stem;
  c.num_classes = spec.model.num_classes;
  c.in_channels = in_channels;
  c.zero_init_residual = spec.model.zero_init_residual;
  c.fused_bn = spec.model.fused_bn;
  c.pretrained = spec.model.pretrained.value_or("");
  c.freeze = spec.model.freeze;
  return c;
}

}  // namespace hpctrain::model
