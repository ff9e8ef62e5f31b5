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

#include "spec/choices.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::model {

// The spec's enumerations (spec/choices.hpp holds their names): torchvision's ImageNet networks,
// then the CIFAR ResNets of He et al. 2016 (sec. 4.2); and the ResNet input stem, torchvision's
// 7x7/stride 2 conv + 3x3/stride 2 max-pool (imagenet) or a 3x3/stride 1 conv and no pooling
// (cifar), for 28x28 and 32x32 images. The CIFAR ResNets always have the cifar stem; AlexNet has
// no choice and takes imagenet.
using Arch = spec::Arch;
using Stem = spec::Stem;

// Every architecture, in declaration order (for tools, tests and "expected one of" messages).
const std::vector<Arch>& all_archs();
// The CIFAR ResNets (resnet20/32/44/56/110).
using spec::is_cifar_resnet;

struct ModelConfig {
  Arch arch{};
  Stem stem{};
  int64_t num_classes = 0;
  int64_t in_channels = 0;  // image channels: 1 (grey), 3 (RGB); at most 4
  bool zero_init_residual = false;
  // ResNets: BN+ReLU and BN+add+ReLU as one op each (model/fused_bn.hpp) instead of torch's
  // modules; the parameters, buffers and state dict are the same. AlexNet has no batch norm.
  bool fused_bn = false;
  std::string pretrained;           // a torch.save'd state dict; empty: none
  std::vector<std::string> freeze;  // parameter-name prefixes, e.g. "conv1", "layer1"

  // Throws rt::Error listing every impossible value at once (num_classes < 2, in_channels
  // outside 1..4, a stem the architecture does not have, fused_bn for AlexNet, an empty freeze
  // prefix).
  void validate() const;
};

// [model] with the dataset's channel count; the stem follows the architecture for the CIFAR
// ResNets (cifar) and AlexNet (imagenet), as the spec's check enforces.
ModelConfig model_config_from_spec(const spec::Spec& spec, int64_t in_channels);

}  // namespace hpctrain::model
