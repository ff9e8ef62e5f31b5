// When the job's time limit (SLURM_JOB_END_TIME) is near enough that the ranks must checkpoint
// and stop as for a stop signal (docs/preemption.md): train/checkpointing.cpp asks this of the
// seconds left at every step. Torch-free.
// Thread safety: a pure function.
#pragma once

namespace hpctrain::preempt {

// The seconds a stop still needs: twice the last save (a save can take longer than the one
// before), three steps (the step in flight and the agreement that stops), and 30 s for the exit.
double seconds_needed_to_stop(double last_save_seconds, double step_seconds);

// True when fewer than seconds_needed_to_stop() are left before the time limit.
bool time_limit_near(double seconds_left, double last_save_seconds, double step_seconds);

}  // namespace hpctrain::preempt
