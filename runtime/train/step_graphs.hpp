// The segments of the static step (train/static_step.hpp) and how each runs. On a CUDA device
// with capture on, the first `warmup_steps` steps run every segment eagerly on a side stream, the
// next step captures each segment as a CUDA graph (at::cuda::CUDAGraph, one memory pool shared
// by all of them, thread-local capture mode) and replays it, and every later step only replays
// them. Anywhere else (the CPU, or capture off) every segment runs eagerly: the eager twin, the
// same code in the same order. Every eager run is under the host-read guard
// (train/host_reads.hpp) and with autocast's weight cache off, as under capture.
//
// What runs between two segments (the gradient all-reduce, the agreement's) stays eager. A step
// whose tensors do not have the captured shapes (a short final batch) runs eagerly; recapture()
// (after a restore) warms up and captures again.
// Thread safety: the training thread only.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain::train {

class StepGraphs {
 public:
  // `names`: the segments, in the order each step runs them.
  StepGraphs(const at::Device& device, std::vector<std::string> names, bool capture,
             int warmup_steps);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // Before the step's first work (on CUDA the step's work moves to the capture stream from here:
  // the batch too, whose memory the allocator then knows that stream uses).
  void begin_step();
  // Once the step's batch is known, before its first segment: whether its tensors have the shapes
  // the graphs were (or will be) captured with; a step without runs eagerly.
  void set_static_shapes(bool static_shapes);
  // Segment `i` of the step: run, captured and replayed, or replayed. `body` gets whether it is
  // being captured.
  void run(size_t i, const std::function<void(bool capturing)>& body);
  // After the step's last work.
  void end_step();
  // The graphs go; the next steps warm up and capture again.
  void recapture();

  bool capture() const { return capture_; }
  // Whether this step replays (or captures) the graphs rather than running eagerly.
  bool graphed() const { return phase_ != Phase::kEager; }
  int64_t captures() const { return captures_; }
  int64_t replays() const { return replays_; }
  // The nodes of the captured graphs together (kernels, copies, memsets): what one step launches
  // inside them; 0 before a capture.
  int64_t graph_nodes() const { return nodes_; }

 private:
  enum class Phase { kEager, kCapture, kReplay };

  at::Device device_;
  std::vector<std::string> names_;
  bool capture_;
  int warmup_steps_;
  int warmup_left_;
  Phase phase_ = Phase::kEager;
  bool warming_ = false;
  int64_t captures_ = 0, replays_ = 0, nodes_ = 0;
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace hpctrain::train
