// Running Slurm's client programs (sbatch, squeue, sacct, scancel, scontrol, sinfo, sacctmgr): by
// argv through common's process starter, each with a deadline, and telling a controller that
// refused from one that did not answer. Every Slurm command hpctrain runs goes through here
// (client.hpp's command implementation is the only caller).
// Thread safety: reentrant.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/process.hpp"

namespace hpctrain::slurm {

// Thrown when a Slurm command fails, times out or answers something unexpected.
class SlurmError : public hpctrain::Error {
 public:
  using hpctrain::Error::Error;
};

// No Slurm controller answered (no configuration found, nothing listening at the controller's
// address, or it timed out). The message says so, quotes Slurm and says how to check.
class SlurmUnreachable : public SlurmError {
 public:
  using SlurmError::SlurmError;
};

// Runs a Slurm client program (sinfo, squeue, ...) by argv with `timeout`. Throws SlurmUnreachable
// when SLURM_CONF names a missing file or the program does not answer in time, and SlurmError when
// it is not installed; otherwise returns its result, failed or not.
common::CommandResult run_slurm_command(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout);

// Starts a Slurm client program that nobody waits for, bounded by timeout(1) to `timeout`; its
// output goes where this program's does. Throws SlurmUnreachable when SLURM_CONF names a missing
// file; a program that cannot be started is not reported.
void start_slurm_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// Throws SlurmUnreachable, quoting `command`'s last line of stderr, when `r` failed because no
// controller answered (is_unreachable_message).
void throw_if_unreachable(const std::string& command, const common::CommandResult& r);

// Whether a Slurm command's error output means that no controller could be reached (rather than
// that the controller refused the request).
bool is_unreachable_message(const std::string& text);

// What a failed command said: its stderr, else its stdout, trimmed; first_line_said: the first
// line of it.
std::string said(const common::CommandResult& r);
std::string first_line_said(const common::CommandResult& r);

// The non-empty lines of a program's output, without a trailing '\r'.
std::vector<std::string> output_lines(const std::string& text);

}  // namespace hpctrain::slurm
