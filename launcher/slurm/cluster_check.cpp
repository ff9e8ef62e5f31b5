#include "slurm/cluster_check.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace hpctrain::slurm {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

// The partition the job goes to: job.partition, else the cluster's default; nullptr (with an
// error) when there is none.
const PartitionInfo* job_partition(const spec::JobSpec& job,
                                   const std::vector<PartitionInfo>& partitions,
                                   spec::DiagnosticSink& sink, const spec::Origin& origin) {
  if (const auto* p = find_partition(partitions, job.partition)) return p;
  std::vector<std::string> names;
  for (const auto& p : partitions) names.push_back(p.name);
  if (job.partition) {
    sink.error(origin, "job.partition",
               "partition '" + *job.partition +
                   "' does not exist on this cluster (sinfo lists: " + joined(names) + ")");
  } else {
    sink.error(
        origin, "job.partition",
        "not set, and the cluster has no default partition (sinfo lists: " + joined(names) + ")",
        "name one with job.partition");
  }
  return nullptr;
}

// GPUs per node, nodes (spares included) and job size, time limit.
void check_partition(const spec::Spec& spec, const PartitionInfo& p, spec::DiagnosticSink& sink,
                     const spec::Origin& origin) {
  const auto& job = spec.job;
  const std::string name = "partition '" + p.name + "'" + (job.partition ? "" : " (the default)");
  if (p.availability != "up") {
    sink.warning(origin, "job.partition",
                 name + " is " + p.availability + ": the job waits until it is up");
  }
  std::vector<std::string> gres;
  for (const auto& g : p.groups) add_unique(gres, g.gres);
  if (job.gpus_per_node > 0 && p.max_gpus_per_node() < job.gpus_per_node) {
    const int64_t most = p.max_gpus_per_node();
    sink.error(origin, "job.gpus_per_node",
               std::to_string(job.gpus_per_node) + " GPUs per node, but the nodes of " + name +
                   (most == 0 ? " have no GPU" : " have at most " + std::to_string(most)) +
                   " (sinfo's GRES: " + joined(gres) + ")",
               most == 0 ? "set job.gpus_per_node = 0 for a CPU job, or pick a GPU partition" : "");
    return;  // the node count below would only repeat it
  }
  const int64_t need = job.nodes + spec.resilience.spare_nodes;
  const std::string asked =
      std::to_string(need) + " nodes" +
      (spec.resilience.spare_nodes > 0
           ? " (job.nodes " + std::to_string(job.nodes) + " + resilience.spare_nodes " +
                 std::to_string(spec.resilience.spare_nodes) + ")"
           : "");
  const int64_t have =
      job.gpus_per_node > 0 ? p.nodes_with_gpus(job.gpus_per_node) : p.total_nodes();
  if (need > have) {
    sink.error(
        origin, "job.nodes",
        asked + ", but " + name + " has " + std::to_string(have) +
            (job.gpus_per_node > 0 ? " with " + std::to_string(job.gpus_per_node) + " GPUs or more"
                                   : ""));
  } else if (p.max_job_nodes && need > *p.max_job_nodes) {
    sink.error(origin, "job.nodes",
               asked + ", but " + name + " takes at most " + std::to_string(*p.max_job_nodes) +
                   " per job (MaxNodes)");
  }
  if (p.max_time_s && job.time_seconds > *p.max_time_s) {
    sink.error(origin, "job.time",
               "'" + job.time + "' is above the time limit of " + name + ", " +
                   spec::format_slurm_time(*p.max_time_s) + " (MaxTime)",
               "ask for at most " + spec::format_slurm_time(*p.max_time_s) +
                   ": near the limit the run checkpoints and is requeued (docs/preemption.md)");
  }
}

void check_accounting(const spec::JobSpec& job, const std::string& partition, const Accounting& a,
                      spec::DiagnosticSink& sink, std::vector<std::string>& notes,
                      const spec::Origin& origin) {
  const std::string what = job.account && job.qos ? "job.account and job.qos"
                           : job.account          ? "job.account"
                                                  : "job.qos";
  if (!a.not_checked.empty()) {
    notes.push_back(what + " not checked: " + a.not_checked);
    return;
  }
  if (a.associations.empty()) {
    notes.push_back(what + " not checked: sacctmgr lists no association of user " + a.user);
    return;
  }
  std::vector<std::string> accounts, allowed;
  for (const auto& s : a.associations) add_unique(accounts, s.account);
  if (job.account &&
      std::none_of(a.associations.begin(), a.associations.end(),
                   [&](const Association& s) { return lower(s.account) == lower(*job.account); })) {
    sink.error(origin, "job.account",
               "user " + a.user + " may not charge account '" + *job.account +
                   "' (sacctmgr's associations: " + joined(accounts) + ")");
  }
  if (!job.qos) return;
  if (std::none_of(a.qos_names.begin(), a.qos_names.end(),
                   [&](const std::string& q) { return lower(q) == lower(*job.qos); })) {
    sink.error(
        origin, "job.qos",
        "QoS '" + *job.qos + "' does not exist (sacctmgr lists: " + joined(a.qos_names) + ")");
    return;
  }
  for (const auto& s : a.associations) {
    if (job.account && lower(s.account) != lower(*job.account)) continue;
    if (!s.partition.empty() && s.partition != partition) continue;
    for (const auto& q : s.qos) add_unique(allowed, q);
  }
  if (!allowed.empty() && std::none_of(allowed.begin(), allowed.end(), [&](const std::string& q) {
        return lower(q) == lower(*job.qos);
      })) {
    sink.error(origin, "job.qos",
               "user " + a.user + (job.account ? " with account '" + *job.account + "'" : "") +
                   " may not use QoS '" + *job.qos + "' (allowed: " + joined(allowed) + ")");
  }
}

}  // namespace

ClusterCheck check_against_cluster(const spec::Spec& spec,
                                   const std::vector<PartitionInfo>& partitions,
                                   const std::optional<Accounting>& accounting,
                                   const spec::Origin& origin) {
  ClusterCheck out;
  spec::DiagnosticSink sink;
  const PartitionInfo* p = job_partition(spec.job, partitions, sink, origin);
  if (p) check_partition(spec, *p, sink, origin);
  if (accounting && (spec.job.account || spec.job.qos)) {
    check_accounting(spec.job, p ? p->name : spec.job.partition.value_or(""), *accounting, sink,
                     out.notes, origin);
  }
  out.diagnostics = sink.all();
  return out;
}

}  // namespace hpctrain::slurm
