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

namespace hpctrain::slurm {

// Thrown when a Slurm command fails, times out or answers something unexpected.
class SlurmError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
};

struct CommandClientOptions {
  std::chrono::milliseconds timeout{60000};  // per command
};

std::unique_ptr<SlurmClient> make_command_client(CommandClientOptions options = {});

// Validates sbatch --parsable output: "123", "123;cluster", or "123_4" for an array task.
// Returns the job id without the cluster, or nullopt.
std::optional<std::string> parse_job_id(const std::string& text);

// Parses "id|state|reason|nodes" lines (squeue -o '%i|%T|%r|%N' and sacct -P alike).
std::vector<JobState> parse_state_lines(const std::string& text, const std::string& source);

}  // namespace hpctrain::slurm
