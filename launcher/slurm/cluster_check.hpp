// `hpctrain check` against the cluster: whether the partition a spec names (or the default one)
// exists and can take the job: its GPUs per node, nodes, job size and time limit, and whether the
// user may charge the account and use the QoS. Pure: the caller queries Slurm
// (cluster_info.hpp). Each problem is a spec diagnostic naming its key, as check's others are.
// Thread safety: reentrant.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "slurm/cluster_info.hpp"
#include "spec/diagnostics.hpp"
#include "spec/spec.hpp"

namespace hpctrain::slurm {

struct ClusterCheck {
  std::vector<spec::Diagnostic> diagnostics;  // errors and warnings, each naming its key
  std::vector<std::string> notes;             // what was not checked, and why
};

// Compares `spec`'s job with `partitions` (sinfo's) and, when given, `accounting` (sacctmgr's,
// asked only when the spec sets job.account or job.qos). Diagnostics carry `origin` (the spec
// file: the cluster's answer has no line in it).
ClusterCheck check_against_cluster(const spec::Spec& spec,
                                   const std::vector<PartitionInfo>& partitions,
                                   const std::optional<Accounting>& accounting,
                                   const spec::Origin& origin);

}  // namespace hpctrain::slurm
