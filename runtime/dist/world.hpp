// Where this process is in the job: rank, world size, local rank, node, from the environment of
// the launcher that started it (Slurm's srun, torchrun, Open MPI's mpirun) or none (one process).
// Missing, malformed or inconsistent variables are errors naming the variable: never a silent
// fallback to rank 0, since two rank-0s is the worst outcome.
// Thread safety: pure functions over an environment map.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::dist {

using EnvMap = std::map<std::string, std::string>;

enum class EnvSource { kSlurm, kTorchrun, kOpenMpi, kSingle };
const char* to_string(EnvSource source);

struct WorldInfo {
  EnvSource source = EnvSource::kSingle;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_index = 0;
  int num_nodes = 1;
  std::vector<std::string> nodes;  // expanded node list (Slurm: the step's); empty if unknown
  // Slurm step: how many tasks each node of `nodes` runs, and SLURM_DISTRIBUTION ("" unset).
  std::vector<int> tasks_per_node;
  std::string distribution;
  std::string hostname;  // this process's host (as given to detect_world)
  // Slurm job facts; empty/0 outside Slurm.
  std::string job_id, step_id, array_job_id, array_task_id;
  int restart_count = 0;
  std::optional<int64_t> job_end_time;  // SLURM_JOB_END_TIME (Unix seconds) when set
  // Rendezvous hints from the environment.
  std::optional<std::string> master_addr;  // MASTER_ADDR
  std::optional<int> master_port;          // MASTER_PORT (1..65535)
  bool pmix = false;                       // PMIX_RANK and PMIX_NAMESPACE are set
  std::optional<int> pmix_rank;            // PMIX_RANK when set
};

// Reads the launch environment. Precedence, from most to least explicit launcher:
// torchrun (RANK/WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK), Slurm step (SLURM_PROCID with a
// step id), else a single process. Variables of a less explicit launcher that are also present
// must agree (e.g. torchrun's RANK inside an srun step must equal SLURM_PROCID), else rt::EnvError
// (common/error.hpp) naming the variable(s).
// Inside a Slurm batch script without srun (SLURM_JOB_ID but no step) it is an error too: the
// worker must be started by srun (or a launcher that sets ranks).
WorldInfo detect_world(const EnvMap& env, const std::string& hostname);

// Every rank's host, derived from the environment without asking anyone (docs/scaling.md, "host
// list"): a Slurm step whose node list and tasks per node are known, its tasks laid out over the
// nodes in blocks (SLURM_DISTRIBUTION unset or "block...", srun's default) or round robin
// ("cyclic..."). Empty when it cannot be derived (another launcher, an arbitrary or plane layout,
// a node list that does not match the counts) or when this rank's own place (its node and local
// rank) disagrees with the derivation: the caller then reads the hosts from the store.
std::vector<std::string> derive_rank_hosts(const WorldInfo& world);

// The process's environment as a map.
EnvMap current_environment();

// One JSON object (no trailing newline) describing `world`, the fields of --describe-env that
// come from the environment.
std::string to_json(const WorldInfo& world);

}  // namespace hpctrain::dist
