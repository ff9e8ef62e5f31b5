// The training step with every tensor at a fixed address after warm-up (train.cuda_graphs,
// docs/runtime.md "The static step"), so that on a GPU its work can be captured once as CUDA
// graphs and replayed (train/step_graphs.hpp), and on the CPU runs as the eager twin: the same
// buffers, the same operations in the same order, no capture. It is the device path's step
// (train/train_step.hpp) with everything the step reads or writes held still:
//
// - the input: each batch's uint8 images and labels are copied into static buffers (eagerly),
//   and the normalisation runs inside the step;
// - the learning rate: a device tensor filled before the step and read by the fused optimizers'
//   tensor-lr kernels (float32 on CUDA, as those kernels read it; float64 on the CPU, whose
//   kernels read it as a double, so the twin's update is today's bit for bit);
// - the gradients: made by the first step and afterwards zeroed and refilled in place (backward
//   accumulates into them), never set to none, so they keep their addresses through warm-up,
//   capture and a restore's re-capture;
// - the optimizer's state (momentum buffers, AdamW's moments and step counts), the loss scaler's
//   scale and growth tracker, the agreement (with fp16's found-inf slot), the loss: all tensors
//   made once and updated in place; a restore's new state tensors are copied into them.
//
// A step is three segments with the collectives eager between them, as until a multi-GPU
// machine proves NCCL inside a graph they must be: forward and backward; (fp16) unscaling into
// the agreement's found-inf slot; the scaler's update, clipping and the fused optimizer step on
// the agreed verdict. From the first step after warm-up every static tensor's address is recorded
// and checked at each later step (rt::Error naming the tensor that moved).
// Thread safety: the training thread only.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/model.hpp"
#include "train/agreement_exchange.hpp"
#include "train/fused_step.hpp"
#include "train/step_graphs.hpp"
#include "train/train_input.hpp"

namespace hpctrain::train {

struct StepParts;
struct StepTaken;
struct TrainStepOptions;

// Named addresses that must not change: recorded once, checked after.
class StaticAddresses {
 public:
  using Named = std::vector<std::pair<std::string, const void*>>;
  bool recorded() const { return recorded_; }
  void record(Named addresses);
  // Whether `now` holds the recorded addresses, in order (the check of every step: no names).
  bool unchanged(const std::vector<const void*>& now) const { return now == pointers_; }
  // Throws rt::Error naming the first tensor whose address differs from the recorded one (or
  // that appeared or went).
  void verify(const Named& addresses) const;

 private:
  bool recorded_ = false;
  Named addresses_;
  std::vector<const void*> pointers_;  // addresses_' addresses alone
};

class StaticStep {
 public:
  // The batch's loss: images (normalised), labels, and the poison factor (a one-element tensor,
  // 1 or NaN; undefined when no sample is poisoned in this run).
  using LossFn = std::function<at::Tensor(const at::Tensor& images, const at::Tensor& labels,
                                          const at::Tensor& poison)>;
  using Contribute = std::function<void(float* slots)>;

  // `capture`: CUDA graphs on a CUDA device (the eager twin elsewhere); `warmup_steps` eager
  // steps before the capture and the addresses' record.
  StaticStep(const TrainStepOptions& options, const at::Device& device, model::Classifier& model,
             StepParts& parts, FusedStep& fused, AgreementExchange& agreement, LossFn loss,
             bool capture, int warmup_steps = 3);
  ~StaticStep();

  std::optional<StepTaken> run(TrainInput& input, int64_t step, const Contribute& contribute);
  // After a restore: the restored optimizer state goes into the static tensors, and the graphs
  // are captured again after a warm-up.
  void restored();

  // Every static tensor by name and address.
  StaticAddresses::Named addresses() const;
  // Their addresses alone, in the same order.
  std::vector<const void*> pointers() const;
  // Steps whose addresses were checked against the record.
  int64_t checked_steps() const { return checked_steps_; }
  const StepGraphs& graphs() const { return graphs_; }

 private:
  void pin();  // the gradients and optimizer state back at their static tensors
  // The learning rate, the poison and the batch into their static tensors; the batch's tensors
  // to train on (the static ones, or the batch's own when its shapes differ).
  std::pair<at::Tensor, at::Tensor> stage(const DeviceBatch& batch, double lr, bool static_shapes);
  void adopt_grads();  // the first step's gradients become the static ones
  void adopt_state();  // the first update's optimizer state becomes the static one
  // The agreement (fp16's verdict in it) all-reduced between the segments, and the update.
  void agree_and_update(const Contribute& contribute, int64_t step);
  void forward_backward(TrainInput& input, const at::Tensor& raw, const at::Tensor& labels);
  void unscale();
  void update();
  // Calls f(tensor, name) for every defined static tensor, in addresses()' order; `name()` makes
  // its name, only when asked.
  template <typename F>
  void each_static(F&& f) const;

  const TrainStepOptions& options_;
  at::Device device_;
  std::vector<std::pair<std::string, at::Tensor>> buffers_;  // the model's (updated in place)
  std::vector<std::string> trainable_;                       // the trainable parameters' names
  StepParts& parts_;
  FusedStep& fused_;
  AgreementExchange& agreement_;
  LossFn loss_fn_;
  StepGraphs graphs_;
  int warmup_steps_;
  int64_t steps_ = 0;  // run by this object
  StaticAddresses record_;
  int64_t checked_steps_ = 0;

  // The static tensors.
  struct Tensors {
    at::Tensor raw, labels;         // the batch: uint8 N x H x W x C, int64 N
    at::Tensor poison;              // float32 one element (1 or NaN), when the run poisons samples
    at::Tensor lr;                  // zero-dim
    at::Tensor agreement;           // Agreement::kSize floats
    at::Tensor loss;                // the step's loss
    std::vector<at::Tensor> grads;  // of the trainable parameters, once made
    // The optimizer's state tensors of each trainable parameter, once made (SGD: momentum
    // buffer; AdamW: exp_avg, exp_avg_sq).
    std::vector<std::vector<at::Tensor>> state;
  };
  Tensors t_;
};

}  // namespace hpctrain::train
