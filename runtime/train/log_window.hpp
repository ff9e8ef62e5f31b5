// The log window: what the trainer measures between two log lines (the training loss, each
// step's busy time on this rank, the wall time less evaluations) and reduces over the ranks with
// one all-reduce per log line. train/reporter.hpp reports the figures; train/straggler_monitor.hpp
// judges the busy times.
// Thread safety: the training thread only; close() is collective.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "common/time.hpp"
#include "dist/communicator.hpp"

namespace hpctrain::train {

// A closed window: this attempt's steps first_step..step.
struct WindowFigures {
  int64_t steps = 0, first_step = 0;
  double mean_loss = 0;                    // over the window's steps and the ranks
  double seconds = 0;                      // wall time less evaluations
  std::vector<double> busy_p50, busy_p95;  // every rank's, by rank
};

class LogWindow {
 public:
  explicit LogWindow(dist::Communicator& comm);

  // The window starts now (this attempt's first step).
  void start();
  // A step ended: its loss (a device tensor, not read) and this rank's busy time in it (from
  // asking for its batch to the end of backward).
  void add_step(const at::Tensor& loss, double busy_s);
  // Time that is not training (an evaluation): the window's clock leaves it out.
  void exclude(double seconds) {
    start_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }
  // Collective: the window ending at step `step` over all ranks; the next one starts now.
  WindowFigures close(int64_t step);
  // Collective: whether every rank's loss of every step since the window began is finite (one
  // all-reduce of a flag; the divergence guard asks before each checkpoint).
  bool finite_so_far();
  // The steps added since the window began.
  int64_t steps() const { return static_cast<int64_t>(busy_.size()); }
  // Forgets the window's steps and starts a new one now (the run rolled back past them).
  void discard();

 private:
  // The median and 95th percentile of this rank's busy times since the last log line.
  std::pair<double, double> busy_percentiles() const;

  dist::Communicator& comm_;
  at::Tensor loss_;           // the window's loss, summed, on the device
  std::vector<double> busy_;  // this rank's busy seconds of each step of the window
  Clock::time_point start_;
};

}  // namespace hpctrain::train
