#include "model/model.hpp"

#include "model/networks.hpp"
#include "model/weights.hpp"

namespace hpctrain::model {

std::shared_ptr<Classifier> build_model(const ModelConfig& config) {
  config.validate();
  std::shared_ptr<Classifier> model =
      config.arch == Arch::kAlexNet ? make_alexnet(config) : make_resnet(config);
  if (!config.pretrained.empty()) load_pretrained(*model, config.pretrained);
  if (!config.freeze.empty()) freeze(*model, config.freeze);
  return model;
}

}  // namespace hpctrain::model
