// When the trainer checkpoints (docs/checkpoint-format.md "When"), as pure decisions of the
// clock, the step and what the ranks agreed: every checkpoint.every_steps steps, every
// checkpoint.every_minutes on rank 0's clock, when the run stops (a stop signal on any rank, or
// the job's time limit near: SLURM_JOB_END_TIME less what a stop needs, preempt/time_limit.hpp),
// and at the end. What a checkpoint holds is train/checkpoint_content.hpp's, how it is written
// and committed train/checkpoint_commit.hpp's; train/checkpointing.hpp puts the three together.
// Every time is an argument, so tests play any sequence of steps, clocks and deadlines.
// Torch-free. Thread safety: one policy per trainer, used from the training thread.
#pragma once

#include <cstdint>
#include <optional>

namespace hpctrain::train {

struct SavePolicyOptions {
  int64_t every_steps = 0;   // 0: not by steps
  double every_minutes = 0;  // 0: not by time
  bool async = false;        // checkpoint.async: a periodic save may be written in the background
  std::optional<int64_t> job_end_time;  // Unix seconds (SLURM_JOB_END_TIME); none: no limit
};

// What rank 0 asks of the ranks at a step (the agreement's kSaveNow and kDeadline slots).
struct SaveRequest {
  bool save_now = false;  // every_minutes have passed since the last save began
  bool deadline = false;  // the time limit is near: save and stop
};

// How the step that just completed is saved.
enum class SaveKind {
  kNone,
  kBackground,  // written in the background while training goes on (async)
  kBlocking,    // written and committed before training goes on
};

class SavePolicy {
 public:
  // `now_s`: a monotonic clock's seconds at the start of training (the minutes count from it).
  SavePolicy(const SavePolicyOptions& options, double now_s);

  // Rank 0's request at a step boundary: `now_s` on the same monotonic clock, `unix_now` the
  // wall clock in Unix seconds, `step_seconds` the last step's duration.
  SaveRequest request(double now_s, int64_t unix_now, double step_seconds) const;

  // After step `step` (just completed) of `total_steps`: whether and how to save, given whether
  // the run stops at this step and whether the ranks agreed to save now (`save_now`) on an
  // agreement gathered at step `gathered_at`. A save request gathered before the newest save
  // began is spent. The last step is not saved here: the run's end saves it (marked finished).
  SaveKind at_step_end(int64_t step, int64_t total_steps, bool stopping, bool save_now,
                       int64_t gathered_at) const;

  // A save of step `step` began at `now_s`.
  void began(int64_t step, double now_s);
  // The newest save took `seconds` from its start to its commit: the time-limit rule plans with
  // it.
  void took(double seconds) { last_save_seconds_ = seconds; }
  double last_save_seconds() const { return last_save_seconds_; }

 private:
  SavePolicyOptions options_;
  double last_save_began_s_;
  int64_t last_save_step_ = -1;
  double last_save_seconds_ = 0;
};

}  // namespace hpctrain::train
