// The spec's enumerated values and their spelling in a job spec. Each list of names exists here
// and nowhere else: the schema's allowed values (and so `hpctrain check`, `hpctrain keys` and
// docs/job-spec.md), parsing and freezing all read these tables, and the runtime's components
// receive the enums, never the text.
// Thread safety: constants and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hpctrain::spec {

enum class ContainerRuntime { kNone, kApptainer, kPyxis };
enum class TailPolicy { kDrop, kPad };
enum class Augment { kNone, kCropFlip, kRandomResizedCrop };
enum class Arch {
  kResNet18,
  kResNet34,
  kResNet50,
  kResNet101,
  kResNet152,
  kAlexNet,
  kResNet20,
  kResNet32,
  kResNet44,
  kResNet56,
  kResNet110,
};
enum class Stem { kImageNet, kCifar };
enum class Precision { kFp32, kFp16, kBf16 };
enum class GradCompression { kNone, kFp16, kBf16 };
// How the ranks' models are kept together (docs/runtime.md, "Local SGD").
enum class Sync { kAllReduce, kLocalSgd };
enum class OuterOptimizer { kNone, kNesterov };
enum class Optimizer { kSgd, kAdamW };
enum class Schedule { kConstant, kCosine, kStep, kMultistep };
enum class Signal { kUsr1, kUsr2, kTerm, kInt, kHup, kUrg, kXcpu };
enum class SweepMode { kGrid, kZip };
// What the step supervisor does when a node of the training step is lost (docs/resilience.md).
enum class OnNodeLoss { kAuto, kReplace, kShrink, kRequeue };

// The CIFAR ResNets of He et al. 2016 (resnet20..resnet110): three stages, their own 3x3 stem.
constexpr bool is_cifar_resnet(Arch arch) {
  return arch == Arch::kResNet20 || arch == Arch::kResNet32 || arch == Arch::kResNet44 ||
         arch == Arch::kResNet56 || arch == Arch::kResNet110;
}

// Names<E>::kValues[i] is the spec's name of the enumerator with value i.
template <typename E>
struct Names;
template <>
struct Names<ContainerRuntime> {
  static constexpr std::array<std::string_view, 3> kValues = {"none", "apptainer", "pyxis"};
};
template <>
struct Names<TailPolicy> {
  static constexpr std::array<std::string_view, 2> kValues = {"drop", "pad"};
};
template <>
struct Names<Augment> {
  static constexpr std::array<std::string_view, 3> kValues = {"none", "crop_flip",
                                                              "random_resized_crop"};
};
template <>
struct Names<Arch> {
  static constexpr std::array<std::string_view, 11> kValues = {
      "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "alexnet",
      "resnet20", "resnet32", "resnet44", "resnet56",  "resnet110"};
};
template <>
struct Names<Stem> {
  static constexpr std::array<std::string_view, 2> kValues = {"imagenet", "cifar"};
};
template <>
struct Names<Precision> {
  static constexpr std::array<std::string_view, 3> kValues = {"fp32", "fp16", "bf16"};
};
template <>
struct Names<GradCompression> {
  static constexpr std::array<std::string_view, 3> kValues = {"none", "fp16", "bf16"};
};
template <>
struct Names<Sync> {
  static constexpr std::array<std::string_view, 2> kValues = {"allreduce", "local_sgd"};
};
template <>
struct Names<OuterOptimizer> {
  static constexpr std::array<std::string_view, 2> kValues = {"none", "nesterov"};
};
template <>
struct Names<Optimizer> {
  static constexpr std::array<std::string_view, 2> kValues = {"sgd", "adamw"};
};
template <>
struct Names<Schedule> {
  static constexpr std::array<std::string_view, 4> kValues = {"constant", "cosine", "step",
                                                              "multistep"};
};
template <>
struct Names<Signal> {
  static constexpr std::array<std::string_view, 7> kValues = {"USR1", "USR2", "TERM", "INT",
                                                              "HUP",  "URG",  "XCPU"};
};
template <>
struct Names<SweepMode> {
  static constexpr std::array<std::string_view, 2> kValues = {"grid", "zip"};
};

template <>
struct Names<OnNodeLoss> {
  static constexpr std::array<std::string_view, 4> kValues = {"auto", "replace", "shrink",
                                                              "requeue"};
};

template <typename E>
constexpr std::string_view name_of(E value) {
  return Names<E>::kValues[static_cast<size_t>(value)];
}

// The enumerator named `name`, or nullopt.
template <typename E>
constexpr std::optional<E> parse_choice(std::string_view name) {
  for (size_t i = 0; i < Names<E>::kValues.size(); ++i) {
    if (Names<E>::kValues[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

// "a|b|c": the allowed values as the schema lists them.
template <typename E>
std::string_view choices_of() {
  static const std::string kJoined = [] {
    std::string out;
    for (const auto name : Names<E>::kValues) out += (out.empty() ? "" : "|") + std::string(name);
    return out;
  }();
  return kJoined;
}

}  // namespace hpctrain::spec
