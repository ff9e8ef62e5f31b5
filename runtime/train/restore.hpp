// Putting checkpointed tensors back into live training state, and the layout rule they must meet.
//
// A tensor read from a checkpoint is a contiguous CPU tensor; its live counterpart may be a
// channels_last half-precision tensor on a GPU. torch's fused optimizer kernels (the device
// path's, train/fused_step.hpp) require every state tensor to have its parameter's device, dtype,
// sizes and strides: the CUDA kernels refuse a mismatch (check_fast_path_restrictions), the CPU
// ones accept it without a word and compute wrong updates. So every restore goes through
// restored_like() or restore_into(), which give the saved values the live tensor's whole layout,
// and check_fused_inputs() states the kernels' rule once, naming the tensor that breaks it, for
// every path (the CPU's too, where torch would not say).
// Thread safety: pure functions on the caller's tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace hpctrain::train {

// A fresh tensor with `live`'s device, dtype, sizes and strides holding `saved`'s values. Throws
// rt::Error naming `what` when the sizes differ.
at::Tensor restored_like(const at::Tensor& saved, const at::Tensor& live, const std::string& what);

// Copies `saved`'s values into `live` in place (its storage, layout and autograd identity stay).
// Throws rt::Error naming `what` when the sizes differ.
void restore_into(const at::Tensor& live, const at::Tensor& saved, const std::string& what);

// The rule torch's fused (multi-tensor) CUDA optimizer kernels check before they run
// (ATen/native/ForeachUtils.h, check_fast_path_restrictions), in words: every tensor strided,
// non-overlapping and dense, with the first parameter's device and dtype; each entry of every
// list with its parameter's sizes and strides (dimensions of size 1 aside). `lists[0]` are the
// parameters; `kinds` names each list ("parameter", "grad", "momentum_buffer", ...), `names` each
// parameter. Throws rt::Error naming the first tensor that breaks the rule, what differs, and
// the parameter's layout.
void check_fused_inputs(const std::vector<std::vector<at::Tensor>>& lists,
                        const std::vector<std::string>& kinds,
                        const std::vector<std::string>& names);

}  // namespace hpctrain::train
