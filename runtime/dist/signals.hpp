// Stop signals (the preemption warning Slurm sends, TERM, INT): the handler only records which
// signal came; ranks agree on it at the next step boundary. Installed before any backend starts,
// and checked afterwards, because communication libraries have taken signals before (NCCL and
// SIGUSR1).
// Thread safety: install() once from the main thread; pending() from any thread.
#pragma once

#include <string>
#include <vector>

namespace hpctrain::dist {

// SIGUSR2 for "USR2" (the names of preemption.signal); throws std::invalid_argument otherwise.
int signal_number(const std::string& name);

// Installs the flag-setting handler for each signal.
void install_stop_signals(const std::vector<int>& signals);

// Throws rt::Error naming the signal if a handler installed by install_stop_signals() was
// replaced (by a library, say) since.
void verify_stop_signals();

// The last stop signal received, or 0.
int pending_stop_signal();

}  // namespace hpctrain::dist
