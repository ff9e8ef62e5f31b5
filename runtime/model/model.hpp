// The image classifiers the runtime trains, built from a ModelConfig: torchvision's ResNet-18..152
// and AlexNet, and the CIFAR ResNet-20..110. Module structure, parameter and buffer names, shapes
// and registration order are torchvision's, so a state dict maps one to one in both directions
// (docs/models.md).
// Thread safety: build_model() is reentrant but draws from torch's global generator, so threads
// that need reproducible weights must not build concurrently. A Classifier is not thread-safe.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "model/config.hpp"

namespace hpctrain::model {

class Classifier : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;

  // Logits [N, num_classes] for images [N, in_channels, H, W].
  virtual torch::Tensor forward(torch::Tensor x) = 0;
  // Name of the first convolution ("conv1", "features.0"): its weight's shape follows
  // in_channels, so pretrained weights for another channel count cannot be used.
  virtual std::string stem_conv() const = 0;
  // Name of the last Linear ("fc", "classifier.6"): its shape follows num_classes, so it is kept
  // freshly initialised when pretrained weights were trained for another number of classes.
  virtual std::string head() const = 0;
};

// Validates `config`, builds the network and initialises it as torchvision does, drawing from
// torch's global generator (the caller seeds it; same seed, same weights as torchvision's
// constructor for the same architecture), then loads `config.pretrained` and freezes
// `config.freeze` (load_pretrained() and freeze() in model/weights.hpp). The model is on the CPU,
// in training mode, in fp32. Throws rt::Error.
std::shared_ptr<Classifier> build_model(const ModelConfig& config);

}  // namespace hpctrain::model
