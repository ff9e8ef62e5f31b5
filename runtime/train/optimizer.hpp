// The optimizer of [train.optimizer]: SGD (momentum, Nesterov, weight decay) or AdamW, libtorch's
// implementations (the same update rules as torch.optim's single-tensor paths; tests/unit/train
// compares them step by step). With decay_bn_bias = false, parameters of one dimension (batch-norm
// weights and biases, layer biases) form a second group without weight decay.
// Thread safety: the optimizer is used from the training thread only.
#pragma once

#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::train {

using NamedParams = std::vector<std::pair<std::string, at::Tensor>>;

// Only the parameters that require grad are optimised; the learning rate is set every step by
// the schedule (set_lr), so the one given here is the schedule's first.
std::unique_ptr<torch::optim::Optimizer> optimizer_from_spec(const spec::Spec& spec,
                                                             const NamedParams& params, double lr);

// Sets the learning rate of every parameter group.
void set_lr(torch::optim::Optimizer& optimizer, double lr);

// The optimizer's per-parameter state by parameter name, as PyTorch names it in
// optimizer.state_dict(): "<param>.momentum_buffer" (SGD), "<param>.exp_avg", "<param>.exp_avg_sq"
// and "<param>.step" (AdamW; a 0-d int64 tensor). Parameters without state yet are absent. The
// tensors are the optimizer's own (the caller copies them to save).
std::vector<std::pair<std::string, at::Tensor>> optimizer_state(
    const torch::optim::Optimizer& optimizer, const NamedParams& params);
// Puts state written by optimizer_state() back: copies into fresh tensors laid out as each
// parameter (device, dtype, sizes and strides: train/restore.hpp). Throws rt::Error naming an
// entry of the wrong shape or a parameter it does not know.
void load_optimizer_state(torch::optim::Optimizer& optimizer, const NamedParams& params,
                          const std::vector<std::pair<std::string, at::Tensor>>& state);

}  // namespace hpctrain::train
