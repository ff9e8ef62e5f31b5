// Model weights in PyTorch's own file format, pretrained initialisation, freezing, and the
// channels_last layout. A weights file is what Python's `torch.save(model.state_dict(), path)`
// writes (a zip archive: data.pkl plus one record per storage), so files move both ways between
// hpctrain and PyTorch/torchvision; docs/models.md describes the format and what is accepted.
// Thread safety: functions are reentrant; a module must not be used by other threads while one of
// them changes it.
#pragma once

#include <torch/nn/module.h>
#include <torch/ordered_dict.h>

#include <cstddef>
#include <string>
#include <vector>

namespace hpctrain::model {

class Classifier;

// Name -> tensor in torchvision's state_dict() order.
using StateDict = torch::OrderedDict<std::string, torch::Tensor>;

// The module's parameters and buffers (BatchNorm's running_mean, running_var and
// num_batches_tracked included) as PyTorch's state_dict() lists them: module by module in
// registration order, each module's parameters before its buffers. The tensors are the module's
// own, not copies.
StateDict state_dict(const torch::nn::Module& module);

// Writes state_dict(module), or `tensors`, to `path` in torch.save's zip format, readable with
// Python's torch.load(path, weights_only=True) (a dict name -> tensor). Tensors are written as
// contiguous CPU copies. Atomic: a temporary file in the same directory, fsynced, then renamed.
// Throws rt::Error naming the file.
void save_weights(const torch::nn::Module& module, const std::string& path);
void save_weights(const StateDict& tensors, const std::string& path);

// Reads a dict name -> tensor written by torch.save (a state dict, OrderedDict or plain dict,
// any dtype, saved from any device) or by save_weights(); tensors are on the CPU. Only what a
// state dict needs is unpickled (as torch.load's weights_only). Throws rt::Error naming the file
// when it is missing, not a torch.save zip archive, truncated, or holds something else.
StateDict load_weights(const std::string& path);

// The bytes save_weights writes (torch.save's format), and back; `name` names the source in
// errors (rt::Error).
std::string weights_to_bytes(const StateDict& tensors);
StateDict weights_from_bytes(const std::string& bytes, const std::string& name);

struct PretrainedLoad {
  size_t tensors = 0;         // copied into the model
  bool head_skipped = false;  // the file's classifier head is for another num_classes
};

// Copies the weights in `path` into `model` (on whatever device and dtype the model has). Every
// name and shape must match, except that the classifier head (model.head(): fc.* or
// classifier.6.*) is kept as initialised when the file has another number of classes. A stem
// convolution for another in_channels is an error, as are unknown or missing names (up to 10 of
// each are listed). The model is unchanged when this throws rt::Error.
PretrainedLoad load_pretrained(Classifier& model, const std::string& path);

// Sets requires_grad = false on every parameter named `prefix` or `prefix.*`, for each prefix
// ("conv1", "layer1", "layer4.1.bn2"). BatchNorm layers keep training mode, so their running
// statistics still update, as in torchvision fine-tuning; put them in eval mode to fix them too.
// A prefix that matches nothing is an error naming it and the top-level modules; then nothing is
// frozen. Returns the number of parameters frozen.
size_t freeze(torch::nn::Module& model, const std::vector<std::string>& prefixes);

// Converts every 4-D parameter and buffer to the channels_last memory format in place (as
// Python's model.to(memory_format=torch.channels_last)); names, shapes and values are unchanged.
void to_channels_last(torch::nn::Module& module);

}  // namespace hpctrain::model
