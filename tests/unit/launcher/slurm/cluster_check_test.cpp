// check against the cluster, without one: sinfo's and sacctmgr's answers parsed from captured text,
// and the comparison of specs with them. The sinfo lines of partitions debug and short were
// captured from the local test cluster (scripts/slurm-local.sh, Slurm 22.05, a partition short
// added with scontrol create); the GPU partitions' lines follow sinfo's documented %G format
// ("gpu:TYPE:COUNT(S:SOCKETS)"), which the local cluster, having no GPUs, cannot print.
// tests/slurm/check_cluster.sh runs check against the real cluster.
#include <gtest/gtest.h>

#include "slurm/client.hpp"
#include "slurm/cluster_check.hpp"
#include "slurm/cluster_info.hpp"
#include "support/test_util.hpp"

namespace hpctrain::slurm {
namespace {

const char* kSinfo =
    "debug*|up|infinite|1-infinite|1|(null)\n"
    "short|up|5:00|1|1|(null)\n"
    "long|up|1-02:04:00|1-4|3|(null)\n"
    "gpu|up|2-00:00:00|1-16|12|gpu:a100:4(S:0-1)\n"
    "gpu|up|2-00:00:00|1-16|2|gpu:a100:8(S:0-1),mps:400\n"
    "maint|down|1:00:00|1-infinite|2|gpu:2\n";

TEST(ClusterInfo, SinfoPartitions) {
  const auto parts = parse_sinfo_partitions(kSinfo);
  ASSERT_EQ(parts.size(), 5u);
  EXPECT_EQ(parts[0].name, "debug");
  EXPECT_TRUE(parts[0].is_default);
  EXPECT_FALSE(parts[0].max_time_s);
  EXPECT_FALSE(parts[0].max_job_nodes);
  EXPECT_EQ(parts[0].total_nodes(), 1);
  EXPECT_EQ(parts[0].max_gpus_per_node(), 0);
  EXPECT_EQ(parts[1].name, "short");
  EXPECT_FALSE(parts[1].is_default);
  EXPECT_EQ(parts[1].max_time_s, 300);
  EXPECT_EQ(parts[1].max_job_nodes, 1);
  EXPECT_EQ(parts[2].max_time_s, (26 * 60 + 4) * 60);
  EXPECT_EQ(parts[2].max_job_nodes, 4);
  // Two node groups of one partition: one entry, nodes added up.
  EXPECT_EQ(parts[3].name, "gpu");
  EXPECT_EQ(parts[3].total_nodes(), 14);
  EXPECT_EQ(parts[3].max_gpus_per_node(), 8);
  EXPECT_EQ(parts[3].nodes_with_gpus(4), 14);
  EXPECT_EQ(parts[3].nodes_with_gpus(5), 2);
  EXPECT_EQ(parts[4].availability, "down");
  EXPECT_TRUE(parse_sinfo_partitions("").empty());
  EXPECT_TRUE(parse_sinfo_partitions("garbage\nx|up|1:00|1|many|(null)\n").empty());
}

TEST(ClusterInfo, TimeLimitsAndGres) {
  EXPECT_FALSE(parse_slurm_time_limit("infinite"));
  EXPECT_FALSE(parse_slurm_time_limit("UNLIMITED"));
  EXPECT_EQ(parse_slurm_time_limit("30"), 1800);
  EXPECT_EQ(parse_slurm_time_limit("5:00"), 300);
  EXPECT_EQ(parse_slurm_time_limit("1:00:00"), 3600);
  EXPECT_EQ(parse_slurm_time_limit("2-00:00:00"), 2 * 86400);
  EXPECT_EQ(parse_slurm_time_limit("1-12"), 36 * 3600);
  EXPECT_EQ(parse_slurm_time_limit("1-12:30"), (36 * 60 + 30) * 60);
  for (const char* bad : {"", "n/a", "1:2:3:4", "a-1", "-5", "1-"}) {
    EXPECT_THROW(parse_slurm_time_limit(bad), SlurmError) << bad;
  }
  EXPECT_EQ(gpus_in_gres("(null)"), 0);
  EXPECT_EQ(gpus_in_gres("gpu:4"), 4);
  EXPECT_EQ(gpus_in_gres("gpu:a100:4(S:0-1)"), 4);
  EXPECT_EQ(gpus_in_gres("gpu:a100:2,gpu:v100:2(S:1),mps:100"), 4);
  EXPECT_EQ(gpus_in_gres("mps:100,shard:8"), 0);
  EXPECT_EQ(gpus_in_gres("gpu"), 1);
}

TEST(ClusterInfo, SacctmgrAssociationsAndQos) {
  const auto a = parse_associations("physics||normal,high\nphysics|gpu|normal\nbio||\n\n");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].account, "physics");
  EXPECT_EQ(a[0].partition, "");
  EXPECT_EQ(a[0].qos, (std::vector<std::string>{"normal", "high"}));
  EXPECT_EQ(a[1].partition, "gpu");
  EXPECT_TRUE(a[2].qos.empty());
  EXPECT_EQ(parse_qos_names("normal\nhigh\n"), (std::vector<std::string>{"normal", "high"}));
}

// The spec's [job] keys `job` (with data and a signal lead that any size and time limit here
// allow), checked against kSinfo and `accounting`.
ClusterCheck check(const std::string& job, const std::optional<Accounting>& accounting = {},
                   const std::string& extra = {}) {
  test::TempDir dir;
  const auto resolved = spec::load(
      test::spec_in(dir, "[job]\nname = \"t\"\nrun_dir = \"/var/tmp/runs/{name}\"\n" + job +
                             "[data]\nsynthetic = true\nsynthetic_samples = 1000000\n[preemption]\n"
                             "signal_lead_s = 10\n" +
                             extra));
  return check_against_cluster(resolved.spec, parse_sinfo_partitions(kSinfo), accounting,
                               {"spec.toml", 0, 0, ""});
}

// Each diagnostic as formatted, one after the other.
std::string text_of(const ClusterCheck& c) {
  std::string out;
  for (const auto& d : c.diagnostics) out += d.format();
  return out;
}

TEST(ClusterCheck, AFittingJobHasNothingToSay) {
  EXPECT_EQ(text_of(check("")), "");  // the default partition
  EXPECT_EQ(text_of(check("partition = \"gpu\"\nnodes = 12\ngpus_per_node = 4\ntasks_per_node = "
                          "4\ntime = \"48:00:00\"\n")),
            "");
  EXPECT_EQ(text_of(check("partition = \"short\"\ntime = \"00:05:00\"\n")), "");
}

TEST(ClusterCheck, EachProblemNamesItsKeyAndValue) {
  EXPECT_EQ(text_of(check("partition = \"nope\"\n")),
            "spec.toml: error: [job.partition] partition 'nope' does not exist on this cluster "
            "(sinfo lists: debug, short, long, gpu, maint)\n");
  const std::string gpus = text_of(check("gpus_per_node = 4\ntasks_per_node = 4\n"));
  EXPECT_NE(gpus.find("error: [job.gpus_per_node] 4 GPUs per node, but the nodes of partition "
                      "'debug' (the default) have no GPU (sinfo's GRES: (null))"),
            std::string::npos)
      << gpus;
  EXPECT_NE(text_of(check("partition = \"gpu\"\ngpus_per_node = 16\ntasks_per_node = 16\n"))
                .find("[job.gpus_per_node] 16 GPUs per node, but the nodes of partition 'gpu' "
                      "have at most 8"),
            std::string::npos);
  EXPECT_NE(text_of(check("partition = \"short\"\ntime = \"00:05:01\"\n"))
                .find("error: [job.time] '00:05:01' is above the time limit of partition "
                      "'short', 00:05:00 (MaxTime)"),
            std::string::npos);
  EXPECT_NE(text_of(check("partition = \"gpu\"\nnodes = 3\ngpus_per_node = 8\ntasks_per_node = "
                          "8\n"))
                .find("[job.nodes] 3 nodes, but partition 'gpu' has 2 with 8 GPUs or more"),
            std::string::npos);
  EXPECT_NE(
      text_of(check("partition = \"long\"\nnodes = 3\n", {}, "[resilience]\nspare_nodes = 1\n"))
          .find("[job.nodes] 4 nodes (job.nodes 3 + resilience.spare_nodes 1), but "
                "partition 'long' has 3"),
      std::string::npos);
  // 14 nodes with 4 GPUs: all of the partition's, within its 16 per job.
  EXPECT_EQ(text_of(check("partition = \"gpu\"\nnodes = 14\ngpus_per_node = 4\ntasks_per_node = "
                          "4\n")),
            "");
  EXPECT_NE(text_of(check("partition = \"short\"\nnodes = 2\n"))
                .find("[job.nodes] 2 nodes, but partition 'short' has 1"),
            std::string::npos);
  const auto down = check("partition = \"maint\"\n");
  ASSERT_EQ(down.diagnostics.size(), 1u);
  EXPECT_EQ(down.diagnostics[0].severity, spec::Severity::kWarning);
  EXPECT_EQ(down.diagnostics[0].key, "job.partition");
}

TEST(ClusterCheck, AccountAndQos) {
  Accounting a;
  a.user = "ada";
  a.associations = parse_associations("physics||normal,high\nphysics|gpu|normal\n");
  a.qos_names = {"normal", "high", "debug"};
  EXPECT_EQ(text_of(check("account = \"physics\"\nqos = \"high\"\n", a)), "");
  EXPECT_NE(text_of(check("account = \"chem\"\n", a))
                .find("error: [job.account] user ada may not charge account 'chem' (sacctmgr's "
                      "associations: physics)"),
            std::string::npos);
  EXPECT_NE(text_of(check("qos = \"gold\"\n", a))
                .find("[job.qos] QoS 'gold' does not exist (sacctmgr lists: normal, high, debug)"),
            std::string::npos);
  EXPECT_NE(text_of(check("account = \"physics\"\nqos = \"debug\"\n", a))
                .find("[job.qos] user ada with account 'physics' may not use QoS 'debug' "
                      "(allowed: normal, high)"),
            std::string::npos);
  // sacctmgr did not answer (accounting off): a note, no error.
  Accounting off;
  off.user = "ada";
  off.not_checked = "sacctmgr said: You are not running a supported accounting_storage plugin";
  const auto c = check("account = \"chem\"\nqos = \"gold\"\n", off);
  EXPECT_TRUE(c.diagnostics.empty());
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_EQ(c.notes[0],
            "job.account and job.qos not checked: sacctmgr said: You are not running a supported "
            "accounting_storage plugin");
}

TEST(ClusterCheck, NoPartitionAndNoDefault) {
  test::TempDir dir;
  const auto resolved = spec::load(test::spec_in(dir, test::minimal_spec()));
  const auto c =
      check_against_cluster(resolved.spec, parse_sinfo_partitions("short|up|5:00|1|1|(null)\n"),
                            std::nullopt, {"spec.toml", 0, 0, ""});
  ASSERT_EQ(c.diagnostics.size(), 1u);
  EXPECT_EQ(c.diagnostics[0].key, "job.partition");
  EXPECT_NE(c.diagnostics[0].message.find("no default partition (sinfo lists: short)"),
            std::string::npos);
}

}  // namespace
}  // namespace hpctrain::slurm
