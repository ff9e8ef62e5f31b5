#include "dist/world.hpp"

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "dist/hostlist.hpp"

extern char** environ;  // POSIX: the process environment

namespace hpctrain::dist {
namespace {

using OptString = std::optional<std::string>;

OptString lookup(const EnvMap& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

bool has(const EnvMap& env, const std::string& name) { return env.count(name) > 0; }

std::string quoted(const std::string& name, const std::string& value) {
  return name + "='" + value + "'";
}

// Strict: decimal digits only, no sign, blanks or trailing junk, within [lo, hi].
int64_t parse_integer(const std::string& name, const std::string& value, int64_t lo, int64_t hi) {
  const bool digits_only = !value.empty() && value.size() <= 18 &&
                           value.find_first_not_of("0123456789") == std::string::npos;
  if (!digits_only) {
    HPCTRAIN_THROW(rt::EnvError, quoted(name, value) + " is not a non-negative integer");
  }
  const int64_t number = std::stoll(value);
  if (number < lo || number > hi) {
    HPCTRAIN_THROW(rt::EnvError, quoted(name, value) + " is out of range [" + std::to_string(lo) +
                                     ", " + std::to_string(hi) + "]");
  }
  return number;
}

std::optional<int> optional_int(const EnvMap& env, const std::string& name, int lo = 0,
                                int hi = INT_MAX) {
  const OptString value = lookup(env, name);
  if (!value) return std::nullopt;
  return static_cast<int>(parse_integer(name, *value, lo, hi));
}

int required_int(const EnvMap& env, const std::string& name, const std::string& launcher,
                 int lo = 0, int hi = INT_MAX) {
  const std::optional<int> value = optional_int(env, name, lo, hi);
  if (!value)
    HPCTRAIN_THROW(rt::EnvError, name + " is not set (" + launcher + " sets it for every process)");
  return *value;
}

// Slurm's tasks-per-node syntax: "2(x3),1" is 2,2,2,1.
std::vector<int> parse_tasks_per_node(const std::string& name, const std::string& value) {
  const std::string bad = quoted(name, value) + " is not a tasks-per-node list like '2(x3),1'";
  std::vector<int> counts;
  size_t start = 0;
  while (true) {
    const size_t comma = value.find(',', start);
    const std::string item = value.substr(start, comma - start);
    const size_t paren = item.find('(');
    const std::string count_text = item.substr(0, paren);
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') {
        HPCTRAIN_THROW(rt::EnvError, bad);
      }
      repeat = parse_integer(name, item.substr(paren + 2, item.size() - paren - 3), 1, INT_MAX);
    }
    const int64_t count = parse_integer(name, count_text, 1, INT_MAX);
    if (static_cast<int64_t>(counts.size()) + repeat > INT_MAX) HPCTRAIN_THROW(rt::EnvError, bad);
    counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(count));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return counts;
}

// Slurm's special step ids (batch script, extern container, interactive and pending steps) are
// not srun steps: their SLURM_PROCID=0 is inherited by everything the batch script starts.
bool is_srun_step_id(const std::string& step_id) {
  if (step_id.empty() || step_id.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  return std::stoll(step_id) < 4294967290LL;  // 0xfffffffa and above are special
}

void check_job_facts(const EnvMap& env, WorldInfo& world) {
  for (const char* name : {"SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"}) {
    if (const OptString value = lookup(env, name)) {
      parse_integer(name, *value, 0, INT64_MAX / 2);  // ids are numbers; keep the text
    }
  }
  world.job_id = lookup(env, "SLURM_JOB_ID").value_or("");
  world.array_job_id = lookup(env, "SLURM_ARRAY_JOB_ID").value_or("");
  world.array_task_id = lookup(env, "SLURM_ARRAY_TASK_ID").value_or("");
  if (const OptString step = lookup(env, "SLURM_STEP_ID")) {
    if (!is_srun_step_id(*step) && *step != "batch" && *step != "extern" &&
        *step != "interactive") {
      parse_integer("SLURM_STEP_ID", *step, 0, 4294967295LL);
    }
    world.step_id = *step;
  }
  world.restart_count = optional_int(env, "SLURM_RESTART_COUNT").value_or(0);
  if (const OptString end = lookup(env, "SLURM_JOB_END_TIME")) {
    world.job_end_time = parse_integer("SLURM_JOB_END_TIME", *end, 0, INT64_MAX / 2);
  }
}

void read_rendezvous_hints(const EnvMap& env, WorldInfo& world) {
  if (const OptString addr = lookup(env, "MASTER_ADDR")) {
    if (addr->empty()) HPCTRAIN_THROW(rt::EnvError, "MASTER_ADDR is set but empty");
    world.master_addr = *addr;
  }
  world.master_port = optional_int(env, "MASTER_PORT", 1, 65535);
  world.pmix_rank = optional_int(env, "PMIX_RANK");
  world.pmix = world.pmix_rank.has_value() && has(env, "PMIX_NAMESPACE");
}

// One launcher's view of the world, for cross-checks between conventions.
struct View {
  std::string rank_var;
  int rank = 0;
  std::string size_var;
  int size = 1;
};

// A Slurm step started by srun: every variable must be present and consistent.
struct SlurmStep {
  View view;
  int local_rank = 0;
  int local_size = 1;
  int node_index = 0;
  int num_nodes = 1;
  std::vector<int> tasks_per_node;
};

// The step's size and this task's rank in it; SLURM_STEP_NUM_TASKS and SLURM_NTASKS must agree.
View read_step_rank(const EnvMap& env) {
  const std::optional<int> step_tasks = optional_int(env, "SLURM_STEP_NUM_TASKS", 1);
  const std::optional<int> ntasks = optional_int(env, "SLURM_NTASKS", 1);
  if (!step_tasks && !ntasks) {
    HPCTRAIN_THROW(rt::EnvError,
                   "neither SLURM_NTASKS nor SLURM_STEP_NUM_TASKS is set inside an srun step");
  }
  if (step_tasks && ntasks && *step_tasks != *ntasks) {
    HPCTRAIN_THROW(rt::EnvError, "SLURM_NTASKS=" + std::to_string(*ntasks) + " disagrees with " +
                                     "SLURM_STEP_NUM_TASKS=" + std::to_string(*step_tasks));
  }
  View view;
  view.size_var = step_tasks ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
  view.size = step_tasks ? *step_tasks : *ntasks;
  view.rank_var = "SLURM_PROCID";
  view.rank = required_int(env, "SLURM_PROCID", "srun");
  if (view.rank >= view.size) {
    HPCTRAIN_THROW(rt::EnvError, "SLURM_PROCID=" + std::to_string(view.rank) + " is not below " +
                                     view.size_var + "=" + std::to_string(view.size));
  }
  return view;
}

// How many tasks each node of the step runs: the step's list, else the job's.
struct TasksPerNode {
  std::string var;
  std::string text;
  std::vector<int> counts;
};

TasksPerNode read_tasks_per_node(const EnvMap& env) {
  for (const char* name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (const OptString text = lookup(env, name)) {
      return {name, *text, parse_tasks_per_node(name, *text)};
    }
  }
  HPCTRAIN_THROW(rt::EnvError,
                 "neither SLURM_STEP_TASKS_PER_NODE nor SLURM_TASKS_PER_NODE is set inside an "
                 "srun step: the local world size is unknown");
}

// The tasks-per-node list must cover the step's nodes and tasks, and this task's node and local
// rank must lie within it. `nodes_var` names where the node count came from.
void check_step_layout(const SlurmStep& step, const TasksPerNode& tpn,
                       const std::string& nodes_var) {
  if (tpn.counts.size() != static_cast<size_t>(step.num_nodes)) {
    HPCTRAIN_THROW(rt::EnvError, quoted(tpn.var, tpn.text) + " lists " +
                                     std::to_string(tpn.counts.size()) + " nodes but " + nodes_var +
                                     " gives " + std::to_string(step.num_nodes));
  }
  const int64_t total = std::accumulate(tpn.counts.begin(), tpn.counts.end(), int64_t{0});
  if (total != step.view.size) {
    HPCTRAIN_THROW(rt::EnvError, quoted(tpn.var, tpn.text) + " adds up to " +
                                     std::to_string(total) + " tasks but " + step.view.size_var +
                                     "=" + std::to_string(step.view.size));
  }
  if (step.node_index >= step.num_nodes) {
    HPCTRAIN_THROW(rt::EnvError, "SLURM_NODEID=" + std::to_string(step.node_index) +
                                     " is not below the " + std::to_string(step.num_nodes) +
                                     " nodes of the step (" + nodes_var + ")");
  }
  const int local_size = tpn.counts[static_cast<size_t>(step.node_index)];
  if (step.local_rank >= local_size) {
    HPCTRAIN_THROW(rt::EnvError, "SLURM_LOCALID=" + std::to_string(step.local_rank) +
                                     " is not below the " + std::to_string(local_size) +
                                     " tasks on node " + std::to_string(step.node_index) + " (" +
                                     tpn.var + ")");
  }
}

SlurmStep read_slurm_step(const EnvMap& env, const std::vector<std::string>& nodes,
                          const std::string& nodelist_var) {
  SlurmStep step;
  step.view = read_step_rank(env);
  step.local_rank = required_int(env, "SLURM_LOCALID", "srun");
  step.node_index = required_int(env, "SLURM_NODEID", "srun");

  // How many nodes the step has: the explicit count, else the node list, else the
  // tasks-per-node list.
  const std::optional<int> num_nodes = optional_int(env, "SLURM_STEP_NUM_NODES", 1);
  if (num_nodes && !nodes.empty() && static_cast<size_t>(*num_nodes) != nodes.size()) {
    HPCTRAIN_THROW(rt::EnvError, nodelist_var + " has " + std::to_string(nodes.size()) +
                                     " nodes but " +
                                     "SLURM_STEP_NUM_NODES=" + std::to_string(*num_nodes));
  }
  const TasksPerNode tpn = read_tasks_per_node(env);
  std::string nodes_var = "SLURM_STEP_NUM_NODES";
  if (num_nodes) {
    step.num_nodes = *num_nodes;
  } else if (!nodes.empty()) {
    step.num_nodes = static_cast<int>(nodes.size());
    nodes_var = nodelist_var;
  } else {
    step.num_nodes = static_cast<int>(tpn.counts.size());
    nodes_var = tpn.var;
  }
  check_step_layout(step, tpn, nodes_var);
  step.local_size = tpn.counts[static_cast<size_t>(step.node_index)];
  step.tasks_per_node = tpn.counts;
  return step;
}

void check_local(const std::string& rank_var, int rank, const std::string& size_var, int size) {
  if (rank >= size) {
    HPCTRAIN_THROW(rt::EnvError, rank_var + "=" + std::to_string(rank) + " is not below " +
                                     size_var + "=" + std::to_string(size));
  }
}

// Where `hostname` sits in the node list (exact, else by short name); -1 when absent.
int node_position(const std::vector<std::string>& nodes, const std::string& hostname) {
  const std::string short_name = hostname.substr(0, hostname.find('.'));
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] == hostname || nodes[i] == short_name) return static_cast<int>(i);
  }
  return -1;
}

// The node list: the step's when srun set one, else the allocation's. Returns the variable read.
std::string read_nodelist(const EnvMap& env, WorldInfo& world) {
  std::string nodelist_var = "SLURM_STEP_NODELIST";
  OptString nodelist = lookup(env, nodelist_var);
  if (!nodelist) {
    nodelist_var = "SLURM_JOB_NODELIST";
    nodelist = lookup(env, nodelist_var);
  }
  if (nodelist) {
    try {
      world.nodes = expand_nodelist(*nodelist);
    } catch (const HostlistError& e) {
      HPCTRAIN_THROW(rt::EnvError, nodelist_var + ": " + e.message());
    }
  }
  return nodelist_var;
}

// Which launchers left their mark in the environment.
struct Launchers {
  bool in_job = false;
  bool srun_step = false;
  bool torchrun = false;
  bool open_mpi = false;
};

Launchers find_launchers(const EnvMap& env, const WorldInfo& world) {
  Launchers found;
  found.in_job = has(env, "SLURM_JOB_ID");
  found.srun_step = found.in_job && is_srun_step_id(world.step_id) && has(env, "SLURM_PROCID");
  found.torchrun = has(env, "RANK") || has(env, "WORLD_SIZE");
  found.open_mpi = has(env, "OMPI_COMM_WORLD_RANK") || has(env, "OMPI_COMM_WORLD_SIZE");
  return found;
}

// A launcher's local variables without its global ones, or Slurm's rank outside an srun step,
// is a process that would wrongly take itself for rank 0.
void refuse_partial_launchers(const EnvMap& env, const WorldInfo& world, const Launchers& found) {
  if (!found.torchrun) {
    for (const char* name : {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}) {
      if (has(env, name))
        HPCTRAIN_THROW(rt::EnvError, std::string(name) + " is set but RANK is not");
    }
  }
  if (!found.open_mpi) {
    for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
      if (has(env, name)) {
        HPCTRAIN_THROW(rt::EnvError, std::string(name) + " is set but OMPI_COMM_WORLD_RANK is not");
      }
    }
  }
  if (found.torchrun || found.open_mpi || found.srun_step) return;
  if (found.in_job) {
    // Every task of a batch script inherits SLURM_PROCID=0: started without srun, each would
    // think it is rank 0.
    const std::string why = !has(env, "SLURM_STEP_ID")
                                ? "SLURM_STEP_ID is not set"
                                : (!is_srun_step_id(world.step_id)
                                       ? "SLURM_STEP_ID=" + world.step_id + " is not an srun step"
                                       : "SLURM_PROCID is not set");
    HPCTRAIN_THROW(rt::EnvError,
                   "SLURM_JOB_ID=" + world.job_id + " is set but " + why +
                       ": this is a batch script or salloc shell, not an srun step. Start the "
                       "worker with srun (or torchrun/mpirun), one process per rank");
  }
  if (has(env, "SLURM_PROCID")) {
    HPCTRAIN_THROW(rt::EnvError, "SLURM_PROCID is set but SLURM_JOB_ID is not: not a Slurm step");
  }
}

// torchrun's variables, the most explicit: they set the whole world.
View adopt_torchrun(const EnvMap& env, WorldInfo& world) {
  world.source = EnvSource::kTorchrun;
  const std::string launcher = "torchrun";
  world.world_size = required_int(env, "WORLD_SIZE", launcher, 1);
  world.rank = required_int(env, "RANK", launcher);
  check_local("RANK", world.rank, "WORLD_SIZE", world.world_size);
  world.local_world_size = required_int(env, "LOCAL_WORLD_SIZE", launcher, 1);
  world.local_rank = required_int(env, "LOCAL_RANK", launcher);
  check_local("LOCAL_RANK", world.local_rank, "LOCAL_WORLD_SIZE", world.local_world_size);
  // torchrun starts the same number of workers on every node.
  if (world.world_size % world.local_world_size != 0) {
    HPCTRAIN_THROW(rt::EnvError, "WORLD_SIZE=" + std::to_string(world.world_size) +
                                     " is not a multiple of LOCAL_WORLD_SIZE=" +
                                     std::to_string(world.local_world_size));
  }
  world.num_nodes = world.world_size / world.local_world_size;
  const std::optional<int> group = optional_int(env, "GROUP_RANK");
  if (!group && world.num_nodes > 1) {
    HPCTRAIN_THROW(rt::EnvError, "GROUP_RANK is not set but WORLD_SIZE/LOCAL_WORLD_SIZE gives " +
                                     std::to_string(world.num_nodes) + " nodes");
  }
  world.node_index = group.value_or(0);
  if (world.node_index >= world.num_nodes) {
    HPCTRAIN_THROW(rt::EnvError, "GROUP_RANK=" + std::to_string(world.node_index) +
                                     " is not below the " + std::to_string(world.num_nodes) +
                                     " nodes (WORLD_SIZE/LOCAL_WORLD_SIZE)");
  }
  return {"RANK", world.rank, "WORLD_SIZE", world.world_size};
}

// mpirun's variables, checked against each other.
struct OpenMpiWorld {
  View view;
  int local_rank = 0;
  int local_size = 1;
};

OpenMpiWorld read_open_mpi(const EnvMap& env) {
  const std::string launcher = "mpirun";
  OpenMpiWorld mpi;
  mpi.view = {"OMPI_COMM_WORLD_RANK", required_int(env, "OMPI_COMM_WORLD_RANK", launcher),
              "OMPI_COMM_WORLD_SIZE", required_int(env, "OMPI_COMM_WORLD_SIZE", launcher, 1)};
  check_local(mpi.view.rank_var, mpi.view.rank, mpi.view.size_var, mpi.view.size);
  mpi.local_size = required_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", launcher, 1);
  mpi.local_rank = required_int(env, "OMPI_COMM_WORLD_LOCAL_RANK", launcher);
  check_local("OMPI_COMM_WORLD_LOCAL_RANK", mpi.local_rank, "OMPI_COMM_WORLD_LOCAL_SIZE",
              mpi.local_size);
  if (mpi.local_size > mpi.view.size) {
    HPCTRAIN_THROW(rt::EnvError,
                   "OMPI_COMM_WORLD_LOCAL_SIZE=" + std::to_string(mpi.local_size) +
                       " exceeds OMPI_COMM_WORLD_SIZE=" + std::to_string(mpi.view.size));
  }
  return mpi;
}

// The world from mpirun when no torchrun is above it.
void adopt_open_mpi(const OpenMpiWorld& mpi, const std::optional<SlurmStep>& step,
                    const std::string& nodelist_var, WorldInfo& world) {
  world.source = EnvSource::kOpenMpi;
  world.rank = mpi.view.rank;
  world.world_size = mpi.view.size;
  world.local_rank = mpi.local_rank;
  world.local_world_size = mpi.local_size;
  // Open MPI exports no node index (OMPI_COMM_WORLD_NODE_RANK is a per-node rank across
  // jobs, not the node's index), so find this host in the node list.
  if (mpi.local_size == mpi.view.size) {
    world.num_nodes = 1;
    world.node_index = 0;
  } else if (step && step->view.size == mpi.view.size) {
    world.num_nodes = step->num_nodes;  // srun started the MPI ranks itself
    world.node_index = step->node_index;
  } else {
    const int position = node_position(world.nodes, world.hostname);
    if (position < 0) {
      HPCTRAIN_THROW(rt::EnvError,
                     "OMPI_COMM_WORLD_LOCAL_SIZE=" + std::to_string(mpi.local_size) +
                         " < OMPI_COMM_WORLD_SIZE=" + std::to_string(mpi.view.size) +
                         " but host '" + world.hostname + "' is not in " +
                         (world.nodes.empty() ? std::string("a Slurm node list") : nodelist_var) +
                         ": the node index is unknown");
    }
    world.num_nodes = static_cast<int>(world.nodes.size());
    world.node_index = position;
  }
}

// The world from the srun step when no other launcher is above it.
void adopt_slurm_step(const SlurmStep& step, WorldInfo& world) {
  world.source = EnvSource::kSlurm;
  world.rank = step.view.rank;
  world.world_size = step.view.size;
  world.local_rank = step.local_rank;
  world.local_world_size = step.local_size;
  world.node_index = step.node_index;
  world.num_nodes = step.num_nodes;
  world.tasks_per_node = step.tasks_per_node;
}

// Two launchers describing the same set of processes must agree on the rank. A different
// world size means one launched the other (srun one task per node, torchrun per GPU), so
// their ranks count different things. `views` holds the most explicit first.
void check_views_agree(const std::vector<View>& views) {
  for (size_t i = 1; i < views.size(); ++i) {
    if (views[i].size == views[0].size && views[i].rank != views[0].rank) {
      HPCTRAIN_THROW(rt::EnvError, views[0].rank_var + "=" + std::to_string(views[0].rank) +
                                       " disagrees with " + views[i].rank_var + "=" +
                                       std::to_string(views[i].rank) + " (" + views[0].size_var +
                                       " = " + views[i].size_var + " = " +
                                       std::to_string(views[0].size) + ")");
    }
  }
}

// PMIx's rank belongs to whoever launched over PMIx: srun in a step, else mpirun, else us.
void check_pmix_rank(const WorldInfo& world, const std::optional<SlurmStep>& step,
                     const std::optional<View>& mpi_view, const std::vector<View>& views) {
  if (!world.pmix_rank) return;
  View owner{"the detected rank", world.rank, "", world.world_size};
  if (step) {
    owner = step->view;
  } else if (mpi_view) {
    owner = *mpi_view;
  } else if (!views.empty()) {
    owner = views[0];
  }
  if (*world.pmix_rank != owner.rank) {
    HPCTRAIN_THROW(rt::EnvError, "PMIX_RANK=" + std::to_string(*world.pmix_rank) +
                                     " disagrees with " + owner.rank_var + "=" +
                                     std::to_string(owner.rank));
  }
}

}  // namespace

const char* to_string(EnvSource source) {
  switch (source) {
    case EnvSource::kSlurm:
      return "slurm";
    case EnvSource::kTorchrun:
      return "torchrun";
    case EnvSource::kOpenMpi:
      return "openmpi";
    case EnvSource::kSingle:
      return "single";
  }
  return "unknown";
}

WorldInfo detect_world(const EnvMap& env, const std::string& hostname) {
  WorldInfo world;
  world.hostname = hostname;
  check_job_facts(env, world);
  read_rendezvous_hints(env, world);
  const std::string nodelist_var = read_nodelist(env, world);
  const Launchers found = find_launchers(env, world);
  refuse_partial_launchers(env, world, found);

  std::optional<SlurmStep> step;
  if (found.srun_step) step = read_slurm_step(env, world.nodes, nodelist_var);
  world.distribution = lookup(env, "SLURM_DISTRIBUTION").value_or("");

  // The most explicit launcher sets the world; every launcher's view is cross-checked.
  std::vector<View> views;  // most explicit first
  std::optional<View> mpi_view;
  if (found.torchrun) views.push_back(adopt_torchrun(env, world));
  if (found.open_mpi) {
    const OpenMpiWorld mpi = read_open_mpi(env);
    if (views.empty()) adopt_open_mpi(mpi, step, nodelist_var, world);
    views.push_back(mpi.view);
    mpi_view = mpi.view;
  }
  if (step) {
    if (views.empty()) adopt_slurm_step(*step, world);
    views.push_back(step->view);
  }
  check_views_agree(views);
  check_pmix_rank(world, step, mpi_view, views);
  return world;
}

std::vector<std::string> derive_rank_hosts(const WorldInfo& world) {
  const std::vector<int>& counts = world.tasks_per_node;
  if (world.source != EnvSource::kSlurm || world.nodes.empty() ||
      counts.size() != world.nodes.size()) {
    return {};
  }
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total != world.world_size) return {};
  // The first level of the layout: "block:cyclic" lays tasks over nodes in blocks.
  const std::string layout = world.distribution.substr(0, world.distribution.find_first_of(":,"));
  std::vector<int> node_of(static_cast<size_t>(world.world_size), -1);
  if (layout.empty() || layout == "block") {
    int r = 0;
    for (size_t n = 0; n < counts.size(); ++n) {
      for (int i = 0; i < counts[n]; ++i) node_of[static_cast<size_t>(r++)] = static_cast<int>(n);
    }
  } else if (layout == "cyclic") {
    std::vector<int> left = counts;
    int r = 0;
    while (r < world.world_size) {
      for (size_t n = 0; n < left.size() && r < world.world_size; ++n) {
        if (left[n] == 0) continue;
        --left[n];
        node_of[static_cast<size_t>(r++)] = static_cast<int>(n);
      }
    }
  } else {
    return {};
  }
  // This rank's own place must be where the layout puts it: its node, and as many ranks before
  // it on that node as its local rank says.
  if (node_of[static_cast<size_t>(world.rank)] != world.node_index) return {};
  int before = 0;
  for (int r = 0; r < world.rank; ++r)
    before += node_of[static_cast<size_t>(r)] == world.node_index;
  if (before != world.local_rank) return {};
  std::vector<std::string> hosts;
  hosts.reserve(node_of.size());
  for (const int n : node_of) hosts.push_back(world.nodes[static_cast<size_t>(n)]);
  return hosts;
}

EnvMap current_environment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t eq = text.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return env;
}

std::string to_json(const WorldInfo& world) {
  nlohmann::ordered_json j;
  j["source"] = to_string(world.source);
  j["rank"] = world.rank;
  j["world_size"] = world.world_size;
  j["local_rank"] = world.local_rank;
  j["local_world_size"] = world.local_world_size;
  j["node_index"] = world.node_index;
  j["num_nodes"] = world.num_nodes;
  j["nodes"] = world.nodes;
  j["hostname"] = world.hostname;
  j["job_id"] = world.job_id;
  j["step_id"] = world.step_id;
  j["array_job_id"] = world.array_job_id;
  j["array_task_id"] = world.array_task_id;
  j["restart_count"] = world.restart_count;
  j["job_end_time"] =
      world.job_end_time ? nlohmann::ordered_json(*world.job_end_time) : nlohmann::ordered_json();
  j["master_addr"] =
      world.master_addr ? nlohmann::ordered_json(*world.master_addr) : nlohmann::ordered_json();
  j["master_port"] =
      world.master_port ? nlohmann::ordered_json(*world.master_port) : nlohmann::ordered_json();
  j["pmix"] = world.pmix;
  j["pmix_rank"] =
      world.pmix_rank ? nlohmann::ordered_json(*world.pmix_rank) : nlohmann::ordered_json();
  return j.dump();
}

}  // namespace hpctrain::dist
