#include "model/config.hpp"

#include <array>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace hpctrain::model {
namespace {

constexpr std::array<std::pair<Arch, std::string_view>, 11> kArchNames = {{
    {Arch::kResNet18, "resnet18"},
    {Arch::kResNet34, "resnet34"},
    {Arch::kResNet50, "resnet50"},
    {Arch::kResNet101, "resnet101"},
    {Arch::kResNet152, "resnet152"},
    {Arch::kAlexNet, "alexnet"},
    {Arch::kResNet20, "resnet20"},
    {Arch::kResNet32, "resnet32"},
    {Arch::kResNet44, "resnet44"},
    {Arch::kResNet56, "resnet56"},
    {Arch::kResNet110, "resnet110"},
}};

// Channels a first convolution accepts: grey, grey + alpha, RGB, RGBA (the dataset format's
// limit, data::kMaxChannels).
constexpr int64_t kMaxInChannels = 4;

}  // namespace

std::string_view arch_name(Arch arch) {
  for (const auto& [value, name] : kArchNames) {
    if (value == arch) return name;
  }
  return "?";
}

std::optional<Arch> parse_arch(std::string_view name) {
  for (const auto& [value, known] : kArchNames) {
    if (known == name) return value;
  }
  return std::nullopt;
}

std::string_view stem_name(Stem stem) { return stem == Stem::kCifar ? "cifar" : "imagenet"; }

std::optional<Stem> parse_stem(std::string_view name) {
  if (name == "imagenet") return Stem::kImageNet;
  if (name == "cifar") return Stem::kCifar;
  return std::nullopt;
}

const std::vector<Arch>& all_archs() {
  static const std::vector<Arch> archs = [] {
    std::vector<Arch> out;
    for (const auto& entry : kArchNames) out.push_back(entry.first);
    return out;
  }();
  return archs;
}

bool is_cifar_resnet(Arch arch) {
  return arch == Arch::kResNet20 || arch == Arch::kResNet32 || arch == Arch::kResNet44 ||
         arch == Arch::kResNet56 || arch == Arch::kResNet110;
}

void ModelConfig::validate() const {
  std::vector<std::string> problems;
  const std::string arch_str(arch_name(arch));
  if (arch_str == "?") problems.push_back("unknown architecture value");
  if (num_classes < 2) {
    problems.push_back("num_classes must be at least 2, got " + std::to_string(num_classes));
  }
  if (in_channels < 1 || in_channels > kMaxInChannels) {
    problems.push_back("in_channels must be 1.." + std::to_string(kMaxInChannels) + ", got " +
                       std::to_string(in_channels));
  }
  if (is_cifar_resnet(arch) && stem != Stem::kCifar) {
    problems.push_back(arch_str + " is a CIFAR ResNet: its stem is always cifar, got " +
                       std::string(stem_name(stem)));
  }
  if (arch == Arch::kAlexNet && stem != Stem::kImageNet) {
    problems.push_back("alexnet has only the imagenet stem, got " + std::string(stem_name(stem)));
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

}  // namespace hpctrain::model
