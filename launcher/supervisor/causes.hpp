// Why a step ended: one classifier, a pure function of what the step supervisor knows when the
// srun step is over (its exit status, the node probe's and the workers' verdicts, the job's state
// in Slurm, rank 0's end of training, the step's last lines of output), and the table of the
// texts it recognises: Slurm's end-of-job banners, the workers' own end lines, and the messages of
// c10d/Gloo/NCCL, CUDA, libc and HDF5 (tests/unit/launcher/supervisor/end_messages.tsv holds real
// ones, each with its source). docs/resilience.md has the table of causes and what is done about
// each.
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/records.hpp"

namespace hpctrain::supervisor {

// What the supervisor knows when a step has ended.
struct EndFacts {
  int status = 0;                               // srun's exit status
  bool terminated = false;                      // TERM came to the batch job
  std::string slurm_state;                      // the job's state now ("" when unknown)
  std::optional<records::LossCause> node_lost;  // a node of the step was found lost, and how
  std::string loss_text;                        // how, in words (the ledger's detected_by)
  bool finished = false;                        // rank 0 recorded the end of training
  std::vector<std::string> lines;               // the step's output, its last lines, in order
  // The run directory's filesystem when the step has ended, where it cannot take the next
  // checkpoint: read-only, or less room than the newest checkpoint took (run::filesystem_trouble);
  // "" when it can. On a full disk the workers' own lines are lost with everything else written
  // there (the step's stderr is a file in the run directory): this is then what says why.
  std::string filesystem;
};

struct Classified {
  records::Cause cause = records::Cause::kUnknown;
  // The line (or Slurm's state) that decided, at most kEvidenceChars; for unknown, the last lines
  // read (joined with " | "), so that a user can see what was there.
  std::string evidence;
};
inline constexpr size_t kEvidenceChars = 400;

// The cause, from the most telling fact down: a lost node, Slurm's banner or state (time limit,
// preemption, node failure, cancellation, its OOM kill), the step's exit status where it says
// enough (0 with rank 0's end: completed; 75: the workers' stop line says time limit or
// preemption; 2: bad input; 77 hang; 78 straggler; 79 diverged), the workers' own end lines, then
// the messages, an originating cause before its consequences (GPU hardware, out of memory,
// filesystem, bad input before network: a rank that dies of one makes its peers see a reset
// connection), the run directory's filesystem in its place among them. A step that exited 0
// without rank 0's end of training is unknown, not completed (srun can exit 0 when no task could
// be launched), unless the filesystem is in trouble.
Classified classify(const EndFacts& facts);

// The cause one line of output names on its own, if any: the table the test checks. Slurm's
// banners and the workers' end lines included; the supervisor's own lines ("hpctrain: ...") name
// none.
std::optional<records::Cause> cause_of_line(std::string_view line);

// The causes that a retry cannot fix by default: the run stops at once (resilience.stop_on's
// default).
inline constexpr const char* kStopOnDefault = "bad_input, diverged, oom";

// "lower train.batch_size (64 per rank now) ...": what the user can do about a cause, for the
// stopped run's last words; empty when there is nothing to say.
std::string advice_for(records::Cause cause, int64_t batch_size);

}  // namespace hpctrain::supervisor
