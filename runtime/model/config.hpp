// What to build: the architecture, its stem, the input and output sizes, and the pretrained
// weights and frozen parameters to apply. Torch-free, so the spec layer can fill and validate it
// without parsing libtorch's headers. The spec layer sets every field; the initialisers below
// are zero values that validate() rejects where a real value is needed, so a forgotten field is
// an error rather than a silent default.
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::model {

// torchvision's ImageNet networks, then the CIFAR ResNets of He et al. 2016 (sec. 4.2).
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

// The ResNet input stem: torchvision's 7x7/stride 2 conv + 3x3/stride 2 max-pool (imagenet), or
// a 3x3/stride 1 conv and no pooling (cifar), for 28x28 and 32x32 images. The CIFAR ResNets
// always have the cifar stem; AlexNet has no choice and takes imagenet.
enum class Stem { kImageNet, kCifar };

// "resnet18", ..., "alexnet", "resnet20", ... as the job spec spells them.
std::string_view arch_name(Arch arch);
std::optional<Arch> parse_arch(std::string_view name);
// "imagenet", "cifar".
std::string_view stem_name(Stem stem);
std::optional<Stem> parse_stem(std::string_view name);
// Every architecture, in declaration order (for tools, tests and "expected one of" messages).
const std::vector<Arch>& all_archs();
// The CIFAR ResNets (resnet20/32/44/56/110).
bool is_cifar_resnet(Arch arch);

struct ModelConfig {
  Arch arch{};
  Stem stem{};
  int64_t num_classes = 0;
  int64_t in_channels = 0;  // image channels: 1 (grey), 3 (RGB); at most 4
  bool zero_init_residual = false;
  std::string pretrained;           // a torch.save'd state dict; empty: none
  std::vector<std::string> freeze;  // parameter-name prefixes, e.g. "conv1", "layer1"

  // Throws rt::Error listing every impossible value at once (num_classes < 2, in_channels
  // outside 1..4, a stem the architecture does not have, an empty freeze prefix).
  void validate() const;
};

}  // namespace hpctrain::model
