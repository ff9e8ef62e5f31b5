// What the cluster offers, as `hpctrain check` compares a spec with it and the step supervisor
// counts a partition's nodes: each partition's nodes, GPUs per node, time limit and job size from
// one `sinfo` call, and the user's associations and the QoS names from `sacctmgr` where accounting
// is on. The types and their pure parsers, for tests with captured text; client.hpp's
// partitions() and accounting() run the queries.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::slurm {

// Nodes of a partition that sinfo groups together (same GRES).
struct NodeGroup {
  int64_t nodes = 0;
  int64_t gpus = 0;  // GPUs per node: the counts of the gpu entries of its GRES, added up
  std::string gres;  // as sinfo prints it ("gpu:a100:4(S:0-1)", "(null)")
};

struct PartitionInfo {
  std::string name;
  bool is_default = false;
  std::string availability;              // "up", "down", "drain", "inact"
  std::optional<int64_t> max_time_s;     // nullopt: no limit ("infinite")
  std::optional<int64_t> max_job_nodes;  // nullopt: no limit
  std::vector<NodeGroup> groups;

  int64_t total_nodes() const;
  // Nodes with at least `gpus` GPUs.
  int64_t nodes_with_gpus(int64_t gpus) const;
  int64_t max_gpus_per_node() const;
};

// One association of the user: the account it may charge, on a partition (empty: all) with the
// QoS it may use (empty: the cluster's default).
struct Association {
  std::string account, partition;
  std::vector<std::string> qos;
};

// What sacctmgr said, or why it could not say it.
struct Accounting {
  std::string user;
  std::string not_checked;  // set when sacctmgr could not answer: why, in a few words
  std::vector<Association> associations;
  std::vector<std::string> qos_names;  // every QoS the cluster defines
};

// sinfo's "%P|%a|%l|%s|%D|%G" lines (kSinfoFormat), one partition per name in order of first
// appearance; a line that does not parse is skipped.
inline constexpr const char* kSinfoFormat = "%P|%a|%l|%s|%D|%G";
std::vector<PartitionInfo> parse_sinfo_partitions(const std::string& text);

// Slurm's time limits: "infinite"/"UNLIMITED" (nullopt), "MM", "MM:SS", "HH:MM:SS", "D-HH",
// "D-HH:MM", "D-HH:MM:SS". Throws SlurmError on anything else.
std::optional<int64_t> parse_slurm_time_limit(const std::string& text);

// GPUs per node in a GRES string: "gpu:4", "gpu:a100:4(S:0-1)", "gpu:a100:2,gpu:v100:2,mps:100"
// (4); 0 for "(null)" or no gpu entry. A gpu entry without a count counts 1.
int64_t gpus_in_gres(const std::string& gres);

// `sacctmgr --noheader --parsable2 show associations ... format=Account,Partition,QOS` lines.
std::vector<Association> parse_associations(const std::string& text);
// `sacctmgr --noheader --parsable2 show qos format=Name` lines.
std::vector<std::string> parse_qos_names(const std::string& text);

// The partition a job goes to: the one named `name`, else (nullopt) the cluster's default;
// nullptr when there is none.
const PartitionInfo* find_partition(const std::vector<PartitionInfo>& partitions,
                                    const std::optional<std::string>& name);

}  // namespace hpctrain::slurm
