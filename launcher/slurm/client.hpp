// Slurm as hpctrain asks it, for the CLI and the step supervisor alike: every command it runs
// (sbatch, squeue, sacct, scancel, scontrol, sinfo, sacctmgr) behind one interface, so that tests
// substitute one fake (tests/unit/launcher/slurm/fake_slurm.hpp). The command implementation runs
// the real client programs by argv with deadlines, through command.hpp's run_slurm_command: a
// controller that does not answer is a SlurmUnreachable wherever it is asked.
// Thread safety: a client is not shared between threads.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/process.hpp"

#include "slurm/cluster_info.hpp"
#include "slurm/command.hpp"

namespace hpctrain::slurm {

struct JobState {
  std::string job_id;  // "123" or "123_4" for an array task
  std::string state;   // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, REQUEUED, ...
  std::string reason;  // squeue's reason, or sacct's exit code
  std::string nodes;
  std::string source;  // "squeue" or "sacct"
  // When the job (its current attempt) started, as Slurm writes it ("2026-11-22T02:48:10", local
  // time); "N/A", "Unknown" or "None" before it starts (parse_slurm_time).
  std::string start{};
};

// sbatch's options besides the script's own.
struct SubmitOptions {
  std::string after;                    // --dependency=afterany:JOB, when not empty
  std::vector<std::string> export_env;  // NAME=VALUE each (no commas): --export=ALL,NAME=VALUE,...
  std::string exclude;                  // --exclude=LIST, when not empty
};

// Each method throws SlurmUnreachable when no controller answers and SlurmError when Slurm
// refuses or is not installed, unless it says otherwise.
class SlurmClient {
 public:
  virtual ~SlurmClient() = default;

  // Jobs.
  // sbatch --parsable: the validated job id.
  virtual std::string submit(const std::filesystem::path& script, const SubmitOptions& options) = 0;
  // The job's state (several for arrays); empty when neither squeue nor sacct knows the job.
  // Throws SlurmUnreachable when squeue gets no answer; a failed sacct counts as not knowing.
  virtual std::vector<JobState> query(const std::string& job_id) = 0;
  // The states of several jobs with one squeue call (and one sacct call for those squeue no longer
  // knows): what `hpctrain list` shows. Jobs neither knows are missing from the result.
  virtual std::vector<JobState> query_all(const std::vector<std::string>& job_ids) = 0;
  virtual void cancel(const std::string& job_id) = 0;
  // scontrol requeue JOB. Slurm's refusal says "scontrol requeue JOB was refused (scontrol: ...)";
  // a scontrol ended by a signal (the requeue's own, when it is slow to exit) is SlurmUnreachable,
  // since the requeue may have been carried out.
  virtual void requeue(const std::string& job_id) = 0;
  // scontrol update JobId=JOB ExcNodeList=LIST.
  virtual void exclude_nodes(const std::string& job_id, const std::string& nodelist) = 0;
  // scancel --signal=SIGNAL JOB: the signal to every step's tasks (not the batch shell), as a
  // preemption notice reaches them.
  virtual void signal(const std::string& job_id, const std::string& signal) = 0;
  // Whether Slurm would requeue the job (scontrol show job's Requeue=1); nullopt when it does not
  // say.
  virtual std::optional<bool> requeue_allowed(const std::string& job_id) = 0;
  // `argv` as a step of its own on `node` inside the job's allocation, beside the running steps
  // (srun --jobid=JOB --overlap -N1 -n1 -w NODE); its result, whatever its exit status.
  virtual common::CommandResult run_in_job(const std::string& job_id, const std::string& node,
                                           const std::vector<std::string>& argv) = 0;

  // Job steps (what srun starts).
  // The job's step ids, "JOB.STEP" only (squeue --steps).
  virtual std::vector<std::string> step_ids(const std::string& job_id) = 0;
  // scancel --signal=KILL STEP, not waited for: it returns only when every node of the step has
  // answered, a lost one too. Never throws: a step it cannot reach ends with its srun.
  virtual void kill_step(const std::string& step_id) = 0;

  // The cluster.
  // scontrol show hostnames LIST: the node names, in order.
  virtual std::vector<std::string> hostnames(const std::string& nodelist) = 0;
  // SlurmdPort from scontrol show config; nullopt when it is not there or not a port.
  virtual std::optional<int> slurmd_port() = 0;
  // Every partition (sinfo --all, parse_sinfo_partitions).
  virtual std::vector<PartitionInfo> partitions() = 0;
  // The associations of `user` and the QoS names (sacctmgr). Never throws: sacctmgr's failures
  // (accounting off, slurmdbd down, a timeout) set not_checked instead.
  virtual Accounting accounting(const std::string& user) = 0;
};

// How long a command may take before its controller counts as unreachable.
struct CommandClientOptions {
  CommandClientOptions(std::chrono::milliseconds each = std::chrono::milliseconds(60000),
                       std::optional<std::chrono::milliseconds> queries = std::nullopt)
      : timeout(each), query_timeout(queries) {}

  std::chrono::milliseconds timeout;  // per command
  // The queries' (squeue, sacct, sinfo, sacctmgr, scontrol show) where shorter: the step
  // supervisor asks them while a step is stopping or the job ending, where a slow answer costs
  // the run its time.
  std::optional<std::chrono::milliseconds> query_timeout;
};

std::unique_ptr<SlurmClient> make_command_client(CommandClientOptions options = {});

// Validates sbatch --parsable output: "123", "123;cluster", or "123_4" for an array task.
// Returns the job id without the cluster, or nullopt.
std::optional<std::string> parse_job_id(const std::string& text);

// States in which a job will not run again (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...); PENDING,
// RUNNING, REQUEUED, COMPLETING and the like are not.
bool is_terminal_state(const std::string& state);

// Parses "id|state|reason|nodes|start" lines (squeue -o '%i|%T|%r|%N|%S' and sacct -P alike);
// the fields after the state may be missing.
std::vector<JobState> parse_state_lines(const std::string& text, const std::string& source);

// Slurm's time stamp ("2026-11-22T02:48:10", in the local time zone, as squeue and sacct write
// it) as Unix seconds; nullopt for anything else ("N/A", "Unknown", "None").
std::optional<double> parse_slurm_time(const std::string& text);

// The state of `job_id` among `states` (query's answer): its own line's, else the first line's
// (squeue may spell an id differently); empty when there is none.
std::string state_of(const std::vector<JobState>& states, const std::string& job_id);

}  // namespace hpctrain::slurm
