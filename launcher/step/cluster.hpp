// What the step supervisor asks of Slurm and of the allocation's nodes, behind an interface so
// that its sequences are tested against a fake (tests/unit/launcher/step/). The command
// implementation runs Slurm's client programs by argv (never a shell) with a deadline each, and
// probes each node's slurmd port with a TCP connection.
// Thread safety: an instance is used by one thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "step/decide.hpp"

namespace hpctrain::step {

class Cluster {
 public:
  virtual ~Cluster() = default;
  // `scontrol show hostnames LIST`; empty when it fails.
  virtual Nodes hostnames(const std::string& nodelist) = 0;
  // SlurmdPort from `scontrol show config`; nullopt when unknown.
  virtual std::optional<int> slurmd_port() = 0;
  // Nodes of `partition` (sinfo); 0 when unknown.
  virtual int64_t partition_nodes(const std::string& partition) = 0;
  // The job's step ids (squeue --steps), "JOB.STEP" only.
  virtual std::vector<std::string> step_ids(const std::string& job) = 0;
  // scancel --signal=KILL STEP, not waited for: it returns only when every node of the step has
  // answered, the lost one too.
  virtual void kill_step(const std::string& step_id) = 0;
  // The job's state (squeue %T), empty when unknown.
  virtual std::string job_state(const std::string& job) = 0;
  // scontrol requeue JOB; whether it succeeded, with what scontrol said when it did not.
  virtual bool requeue(const std::string& job, std::string* said) = 0;
  // scontrol update JobId=JOB ExcNodeList=LIST.
  virtual bool exclude(const std::string& job, const std::string& list) = 0;
  // The next job of a chain: sbatch --parsable --dependency=afterany:JOB of `script`, with
  // HPCTRAIN_CHAIN_RESTART=`restart` in its environment and `exclude` (when not empty) as
  // --exclude. Its job id, or nullopt with what sbatch said.
  virtual std::optional<std::string> submit_next(const std::string& job,
                                                 const std::filesystem::path& script,
                                                 int64_t restart, const std::string& exclude,
                                                 std::string* said) = 0;
  // Each of `nodes` whose slurmd on `port` does not take a TCP connection within `timeout`:
  // (node, "silent") when nothing answers (cut off, powered off), (node, "refused") when the
  // connection is refused or the name does not resolve (its processes were killed).
  virtual std::vector<std::pair<std::string, std::string>> probe(
      const Nodes& nodes, int port, std::chrono::milliseconds timeout) = 0;
};

std::unique_ptr<Cluster> make_command_cluster();

// TCP connections to every (host, port) at once, for at most `timeout`: "" (answered),
// "silent" or "refused" for each, in order.
std::vector<std::string> probe_tcp(const Nodes& hosts, int port, std::chrono::milliseconds timeout);

}  // namespace hpctrain::step
