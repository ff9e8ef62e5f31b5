// The optimizer step of the device path (train/device_input.hpp): one fused kernel per parameter
// group (at::_fused_sgd_, at::_fused_adamw_, as torch.optim's fused=True), which takes the fp16
// inf/NaN verdict as a tensor and skips the update on the device, so deciding to skip needs no
// read on the host. The state lives in the torch::optim::Optimizer as always (SGDParamState,
// AdamWParamState), so checkpoints (train/optimizer.hpp) see no difference, except AdamW's step
// counts, which the kernel keeps in float tensors on the device: flush_state() writes them into
// the optimizer's state (before a checkpoint is captured), reload_state() reads them back (after
// one is restored).
//
// The first step after construction or reload_state() checks what torch's CUDA kernels require
// of their inputs (train/restore.hpp, check_fused_inputs: each gradient and state tensor laid out
// as its parameter) on every device, so a restored state in the wrong layout is an error naming
// the tensor, on the CPU too, whose kernels would compute wrong updates without a word.
//
// The update rules are torch.optim's: SGD with momentum, dampening 0, Nesterov and weight decay;
// AdamW. SGD's momentum buffer starts at zero instead of a copy of the first gradient, which
// gives the same buffer after the first step (0 * momentum + gradient); a skipped first step
// leaves a zero buffer where torch.optim would have none, with the same effect.
// Thread safety: the training thread only.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <map>
#include <string>
#include <vector>

#include "train/optimizer.hpp"

namespace hpctrain::train {

class FusedStep {
 public:
  // `optimizer`: an SGD or AdamW from optimizer_from_spec(); throws rt::Error for another.
  // `params`: the parameters by name, for errors (unnamed ones are called by their position).
  explicit FusedStep(torch::optim::Optimizer& optimizer, const NamedParams& params = {});

  // One step over the parameters with a gradient. found_inf: undefined, or a one-element float32
  // tensor on the parameters' device holding 0 (step) or 1 (skip: parameters and state stay).
  // lr: undefined (the groups' own learning rate), or a zero-dim tensor on the parameters' device
  // that the kernels read there (the static step, train/static_step.hpp: float32 on CUDA).
  void step(const at::Tensor& found_inf, const at::Tensor& lr = {});

  void flush_state();
  // Reads the step counts back from the optimizer's state into the tensors the kernels use, in
  // place (their addresses stay: the static step's graphs hold them).
  void reload_state();
  // AdamW: the step count tensors, one per parameter that has state (in no particular order).
  std::vector<at::Tensor> step_counts() const;

 private:
  torch::optim::Optimizer& optimizer_;
  bool adamw_ = false;
  bool checked_ = false;                      // the inputs' layout, once after each (re)load
  std::map<const void*, std::string> names_;  // by TensorImpl
  // AdamW: the step count of each parameter (by TensorImpl, as the optimizer's state is keyed).
  std::vector<std::pair<void*, at::Tensor>> steps_;
  at::Tensor& step_tensor(const at::Tensor& param);
  // What torch's CUDA kernels require of a group's tensors (train/restore.hpp).
  void check_group(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                   const std::vector<at::Tensor>& bufs, const std::vector<at::Tensor>& exp_avgs,
                   const std::vector<at::Tensor>& exp_avg_sqs) const;
};

// Scales the gradients so their global 2-norm is at most max_norm, as
// torch.nn.utils.clip_grad_norm_ does, without reading the norm on the host.
void clip_grad_norm_on_device(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace hpctrain::train
