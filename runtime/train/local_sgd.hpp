// Local SGD (train.sync = "local_sgd", docs/runtime.md "Local SGD"): each rank takes optimizer
// steps on its own gradients, without the per-step all-reduce, and every sync_every_steps local
// steps the ranks average their parameters and floating-point buffers (batch-norm statistics):
// one all-reduce of the model instead of one of the gradients per step. The first
// sync_warmup_steps steps train with the all-reduce as usual.
//
// The averaging can go through an outer optimizer (outer_optimizer = "nesterov", as DiLoCo,
// Douillard et al. 2023): the ranks' mean change since the last averaging, anchor - mean, is the
// outer gradient of SGD with Nesterov momentum (torch.optim.SGD's update, dampening 0), applied to
// the anchor (the model of the last averaging); the result is every rank's model. With "none" the
// mean itself is the model.
//
// What a checkpoint must hold beyond the all-reduce trainer's: every rank's own parameters,
// buffers and optimizer state (they differ between averagings), and state(): the anchor, the
// outer momentum and the count of local steps since the last averaging (the same on every rank).
// Thread safety: the training thread only; synchronize() is a collective.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.hpp"
#include "spec/choices.hpp"
#include "train/local_sgd_options.hpp"

namespace hpctrain::train {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class LocalSgd {
 public:
  // `params`: the trainable parameters by name; `buffers`: the model's buffers by name (only
  // floating-point ones are averaged; integer ones, such as num_batches_tracked, are equal on
  // every rank anyway).
  LocalSgd(NamedTensors params, NamedTensors buffers, dist::Communicator& comm,
           LocalSgdOptions options);

  // Whether the step that begins after `completed` optimizer steps trains locally: its gradients
  // stay on this rank.
  bool local(int64_t completed) const { return completed >= options_.warmup_steps; }
  // Call as each local step begins (before its optimizer update): counts it, and with the
  // Nesterov outer optimizer takes the anchor from the first one.
  void start_local_step();
  // Whether the local steps since the last averaging make a period (time to synchronize()).
  bool due() const { return local_steps_ >= options_.every_steps; }
  // Whether some local step was taken since the last averaging (the ranks may differ).
  bool diverged() const { return local_steps_ > 0; }
  int64_t local_steps() const { return local_steps_; }

  // Collective: averages the parameters and floating-point buffers over the ranks, applies the
  // outer step, and restarts the period. Afterwards every rank holds the same bits.
  void synchronize();

  // The state shared by all ranks: "local_steps" (a 0-d int64), and with the Nesterov outer
  // optimizer "anchor.<param>" and "momentum.<param>" once they exist. The tensors are this
  // object's own (the caller copies them to save).
  NamedTensors state() const;
  // Puts state() back; throws rt::Error naming an entry it does not know or of the wrong shape.
  // `skip`: entries ("local_steps", "anchor", "momentum") left as they are (resume ablation).
  void load_state(const NamedTensors& state, const std::vector<std::string>& skip = {});

  // Averagings done by this process and the bytes each rank contributed to them.
  int64_t synchronizations() const { return synchronizations_; }
  int64_t bytes_averaged() const { return bytes_averaged_; }

 private:
  NamedTensors params_, buffers_;  // buffers_: the floating-point ones
  dist::Communicator& comm_;
  LocalSgdOptions options_;
  int64_t local_steps_ = 0;
  // Nesterov: the model of the last averaging and the outer momentum, per parameter; empty
  // until the first local step (anchor) and the first outer step (momentum).
  std::vector<at::Tensor> anchor_, momentum_;
  int64_t synchronizations_ = 0, bytes_averaged_ = 0;
};

// Averages state dicts entry by entry (same names and shapes in each): floating-point entries are
// the mean, in the order given, integer entries are taken from the first. For resuming local SGD
// at another world size: every new rank starts from the mean of the ranks that saved.
NamedTensors average_state(const std::vector<NamedTensors>& states);

}  // namespace hpctrain::train
