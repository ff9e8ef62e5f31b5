// The Slurm commands hpctrain needs (sbatch, squeue, sacct, scancel), behind a small interface so
// that tests and other front ends can substitute their own. The command implementation runs the
// real client programs by argv with deadlines.
// Thread safety: a client is not shared between threads.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
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

struct JobState {
  std::string job_id;  // "123" or "123_4" for an array task
  std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, REQUEUED, ...
  std::string reason;  // squeue's reason, or sacct's exit code
  std::string nodes;
  std::string source;  // "squeue" or "sacct"
};

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;
  // Submits `script` and returns the validated job id.
  virtual std::string submit(const std::filesystem::path& script) = 0;
  // The job's state (several for arrays); empty when neither squeue nor sacct knows the job.
  virtual std::vector<JobState> query(const std::string& job_id) = 0;
  virtual void cancel(const std::string& job_id) = 0;
  // The states of several jobs with one squeue call (and one sacct call for those squeue no longer
  // knows): what `hpctrain list` shows. Jobs neither knows are missing from the result. Throws
  // SlurmUnreachable when no controller answers.
  virtual std::vector<JobState> query_all(const std::vector<std::string>& job_ids) = 0;
};

struct CommandClientOptions {
  std::chrono::milliseconds timeout{60000};  // per command
};

std::unique_ptr<SlurmClient> make_command_client(CommandClientOptions options = {});

// Validates sbatch --parsable output: "123", "123;cluster", or "123_4" for an array task.
// Returns the job id without the cluster, or nullopt.
std::optional<std::string> parse_job_id(const std::string& text);

// Runs a Slurm client program (sinfo, squeue, ...) by argv with `timeout`. Throws SlurmUnreachable
// when SLURM_CONF names a missing file or the program does not answer in time, and SlurmError when
// it is not installed; otherwise returns its result, failed or not.
common::CommandResult run_slurm_command(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout);

// Throws SlurmUnreachable, quoting `command`'s last line of stderr, when `r` failed because no
// controller answered (is_unreachable_message).
void throw_if_unreachable(const std::string& command, const common::CommandResult& r);

// Whether a Slurm command's error output means that no controller could be reached (rather than
// that the controller refused the request).
bool is_unreachable_message(const std::string& text);

// States in which a job will not run again (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...); PENDING,
// RUNNING, REQUEUED, COMPLETING and the like are not.
bool is_terminal_state(const std::string& state);

// Parses "id|state|reason|nodes" lines (squeue -o '%i|%T|%r|%N' and sacct -P alike).
std::vector<JobState> parse_state_lines(const std::string& text, const std::string& source);

}  // namespace hpctrain::slurm
