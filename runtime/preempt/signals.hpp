// Stop signals (the preemption warning Slurm sends, TERM, INT): the handler only records which
// signal came; ranks agree on it at the next step boundary. Installed before any backend starts,
// and checked afterwards, because communication libraries have taken signals before (NCCL and
// SIGUSR1).
// Thread safety: install() once from the main thread; pending() from any thread.
#pragma once

#include <vector>

#include "spec/choices.hpp"

namespace hpctrain::preempt {

// The signal number of preemption.signal (SIGUSR2 for Signal::kUsr2).
int signal_number(spec::Signal signal);

// Installs the flag-setting handler for each signal.
void install_stop_signals(const std::vector<int>& signals);

// Throws rt::Error naming the signal if a handler installed by install_stop_signals() was
// replaced (by a library, say) since.
void verify_stop_signals();

// The last stop signal received, or 0.
int pending_stop_signal();

}  // namespace hpctrain::preempt
