// The architectures behind build_model(), one constructor per family. Internal to hpctrain_model:
// callers use build_model(), which validates the configuration first.
// Thread safety: as build_model().
#pragma once

#include <memory>

#include "model/model.hpp"

namespace hpctrain::model {

// torchvision's ResNet-18/34/50/101/152 (imagenet or cifar stem) and the CIFAR ResNet-20..110.
std::shared_ptr<Classifier> make_resnet(const ModelConfig& config);
// torchvision's AlexNet.
std::shared_ptr<Classifier> make_alexnet(const ModelConfig& config);

}  // namespace hpctrain::model
