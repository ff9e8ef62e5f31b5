// Exit statuses of hpctrain's programs, defined once: the launcher (`hpctrain`), the worker
// (`hpctrain-worker`), the data tool and the step supervisor (`hpctrain supervise`, which the
// rendered sbatch script hands over to) agree on them (docs/runtime.md lists them for users).
// Thread safety: constants.
#pragma once

#include <string>

#include "common/error.hpp"

namespace hpctrain {

inline constexpr int kExitOk = 0;
// A failure at run time: a peer lost, Slurm or the filesystem in trouble, a bug.
inline constexpr int kExitFailure = 1;
// Bad input that a rerun will not fix: the spec, the command line, the launch environment, a
// dataset file.
inline constexpr int kExitBadInput = 2;
// The worker checkpointed because it was told to stop (preemption, time limit): the step
// supervisor requeues the job (EX_TEMPFAIL).
inline constexpr int kExitRequeue = 75;
// The worker's heartbeat found a peer, or the store on rank 0, silent past
// resilience.heartbeat_timeout_s and stopped this rank rather than wait for the collective
// timeout: the step supervisor checks the step's nodes and, if one is lost, recovers
// (docs/resilience.md). EX_PROTOCOL.
inline constexpr int kExitPeerLost = 76;
// The hang watchdog found a rank that makes no progress while it is alive (stuck in data
// loading, a collective, the filesystem): every rank stops, the ranks the others wait for after
// printing their threads' stacks (docs/resilience.md "Hangs").
inline constexpr int kExitHang = 77;
// Every rank checkpointed because one node was slower than the others for
// resilience.straggler_windows log windows in a row (resilience.evict_stragglers): the step
// supervisor replaces that node as if it were lost (docs/resilience.md "Stragglers").
inline constexpr int kExitEvict = 78;
// The loss diverged (not finite, or a spike past resilience.loss_spike_factor, or fp16 skipping
// every step): every rank stops and the step supervisor stops the run (cause diverged) rather than
// retry what would diverge again.
inline constexpr int kExitDiverged = 79;

// How a worker says why it ended, one line on stderr before a failed exit, which the step
// supervisor's classifier reads (launcher/supervisor/causes.hpp): "hpctrain-worker ended: CAUSE
// (exit status N): what", CAUSE a name of records::Cause.
inline constexpr const char* kWorkerEndMarker = "hpctrain-worker ended: ";

// Thrown to end a program with `status` once what() (a whole message, "hpctrain: ..." for the
// launcher) is printed to stderr: the launcher's commands and what they call in launcher/run.
class ExitWith : public Error {
 public:
  ExitWith(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace hpctrain
