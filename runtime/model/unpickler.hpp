// Reads the pickle of a torch.save'd dict of tensors (data.pkl of the zip archive) without
// Python. libtorch's own unpickler (torch::pickle_load) cannot: it turns collections.OrderedDict,
// which every state_dict() is, into None (pytorch/pytorch#100741). This one understands exactly
// what state dicts need, pickle protocols 2 to 5: dicts and OrderedDicts (their _metadata
// attribute is dropped), tuples and lists, ints, floats, strings, bools, None, persistent storage
// references, and the rebuild functions torch._utils._rebuild_tensor_v2 / _rebuild_parameter.
// Any other global is refused, as torch.load(weights_only=True) refuses it.
// Thread safety: reentrant.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "model/weights.hpp"

namespace hpctrain::model {

// Returns storage `key` (the zip record data/<key>) as a 1-D CPU tensor of `numel` elements.
using StorageLoader =
    std::function<torch::Tensor(const std::string& key, torch::ScalarType dtype, int64_t numel)>;

// The dict name -> tensor in `pickle`. Throws std::runtime_error saying what is wrong (bad or
// truncated pickle, a refused global, not a dict of tensors); the caller names the file.
StateDict unpickle_state_dict(std::string_view pickle, const StorageLoader& load_storage);

}  // namespace hpctrain::model
