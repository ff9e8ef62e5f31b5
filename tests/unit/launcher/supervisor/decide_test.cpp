// The step supervisor's decisions as pure functions (launcher/supervisor/decide.hpp): the failure
// chain, the no-progress count with an attempt's own checkpoint as progress, the nodes a step
// trains on, the avoidance of nodes lost earlier, recovery after a loss, the ledger's reasons and
// the verdicts read from metrics.jsonl.
#include <gtest/gtest.h>

#include "common/exit_codes.hpp"
#include "supervisor/decide.hpp"

namespace hpctrain::supervisor {
namespace {

using records::Cause;

records::Reason reason_named(const std::string& name) {
  return records::parse<records::Reason>(name).value();
}

records::Attempt line(const std::string& reason, std::optional<int64_t> last_step = std::nullopt,
                      const std::string& job = "7", const std::string& lost = "") {
  records::Attempt a;
  a.job_id = job;
  a.reason = reason_named(reason);
  a.last_step = last_step;
  a.lost_nodes = lost;
  return a;
}

Knobs knobs() {
  Knobs k;
  k.requeue_enabled = true;
  k.max_restarts = 10;
  k.max_failures = 2;
  k.max_no_progress = 0;
  k.train_nodes = 3;
  k.tasks_per_node = 2;
  k.policy = spec::OnNodeLoss::kReplace;
  k.max_node_losses = 2;
  return k;
}

TEST(StepDecide, ConsecutiveFailuresEndAtAnyOtherLine) {
  EXPECT_EQ(consecutive_failures({}), 0);
  EXPECT_EQ(consecutive_failures({line("failed"), line("failed_requeued")}), 2);
  // A node lost breaks the chain: [failed, failed, node lost] has none at the end.
  EXPECT_EQ(consecutive_failures({line("failed"), line("failed"), line("node_lost_requeued")}), 0);
  EXPECT_EQ(consecutive_failures({line("node_lost_requeued"), line("failed"), line("failed")}), 2);
  EXPECT_EQ(consecutive_failures({line("failed"), line("requeued"), line("failed_requeued")}), 1);
  // Across a chain (Slurm refused the requeue) as across requeues.
  EXPECT_EQ(consecutive_failures(
                {line("failed_chained"), line("failed_requeued"), line("failed_chained")}),
            3)
      << "the failures of a chain's jobs are not counted";
  EXPECT_EQ(consecutive_failures({line("failed_chained"), line("chained")}), 0);
  EXPECT_EQ(consecutive_failures({line("failed_chained"), line("node_lost_chained")}), 0);
}

TEST(StepDecide, AttemptsWithoutProgressCountTheFirstCommitAsProgress) {
  // No checkpoint ever: every attempt, this one included, went without.
  EXPECT_EQ(attempts_without_progress({}, std::nullopt), 1);
  const auto none = line("failed_requeued");
  EXPECT_EQ(attempts_without_progress({none, none, none, none}, std::nullopt), 5);
  // This attempt commits one: progress.
  EXPECT_EQ(attempts_without_progress({none, none, none, none}, 10), 0);
  // The first attempt committed 10, nothing since: the ones after it count.
  const auto at10 = line("requeued", 10);
  EXPECT_EQ(attempts_without_progress({at10}, 10), 1);
  EXPECT_EQ(attempts_without_progress({at10, at10}, 10), 2);
  EXPECT_EQ(attempts_without_progress({none, at10, at10}, 10), 2);
  // A first attempt that left a checkpoint made progress itself.
  EXPECT_EQ(attempts_without_progress({}, 10), 0);
}

// A run's attempts one after another, as the supervisor ends each: `committed[i]` is the newest
// committed checkpoint when attempt i ended (its ledger line's last_step); every attempt was
// preempted (exit 75). Each attempt's count of attempts without progress and its ledger reason.
struct Ended {
  std::vector<int64_t> stalled;
  std::vector<std::string> reasons;
};
Ended walk(const std::vector<std::optional<int64_t>>& committed, int64_t max_no_progress) {
  auto k = knobs();
  k.max_no_progress = max_no_progress;
  std::vector<records::Attempt> ledger;
  Ended out;
  for (const auto& newest : committed) {
    const int64_t stalled = attempts_without_progress(ledger, newest);
    const auto restart = static_cast<int64_t>(ledger.size());
    const std::string reason(records::name_of(
        end_reason(k, {false, false, kExitRequeue, restart, 0, stalled, Cause::kPreempted})));
    out.stalled.push_back(stalled);
    out.reasons.push_back(reason);
    ledger.push_back(line(reason, newest));
  }
  return out;
}

using Steps = std::vector<std::optional<int64_t>>;
using Reasons = std::vector<std::string>;

// The first attempt committed step 10 and no later one did: the first made progress, each later
// one adds one, and the breaker (3) stops the fourth attempt, not the third.
TEST(StepDecide, NoProgressAfterTheFirstAttemptsCheckpoint) {
  const Ended e = walk(Steps{10, 10, 10, 10}, /*max_no_progress=*/3);
  EXPECT_EQ(e.stalled, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(e.reasons, (Reasons{"requeued", "requeued", "requeued", "no_progress"}));
}

// Every attempt committed a newer checkpoint: none went without progress, so even a breaker of 1
// never stops the run.
TEST(StepDecide, NoProgressBreakerSparesEveryAttemptThatAdvanced) {
  const Ended e = walk(Steps{10, 20, 30, 40}, /*max_no_progress=*/1);
  EXPECT_EQ(e.stalled, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(e.reasons, (Reasons{"requeued", "requeued", "requeued", "requeued"}));
}

// The first attempt committed 10, the second nothing new, the third 20, then two without: the
// count starts again at the third, and the breaker (2) stops the fifth.
TEST(StepDecide, NoProgressCountStartsAgainAtEachNewCheckpoint) {
  const Ended e = walk(Steps{10, 10, 20, 20, 20}, /*max_no_progress=*/2);
  EXPECT_EQ(e.stalled, (std::vector<int64_t>{0, 1, 0, 1, 2}));
  EXPECT_EQ(e.reasons, (Reasons{"requeued", "requeued", "requeued", "requeued", "no_progress"}));
  // Attempts before the first checkpoint count until it comes.
  const Ended late = walk(Steps{std::nullopt, std::nullopt, 10, 10}, /*max_no_progress=*/3);
  EXPECT_EQ(late.stalled, (std::vector<int64_t>{1, 2, 0, 1}));
  EXPECT_EQ(late.reasons, (Reasons{"requeued", "requeued", "requeued", "requeued"}));
}

TEST(StepDecide, EarlierLostNodesOfThisJobOnly) {
  const std::vector<records::Attempt> ledger = {
      line("node_lost", 1, "7", "n2,n3"), line("node_lost", 1, "8", "n9"),
      line("node_lost_requeued", 1, "7", "n3,bad name,n4")};
  EXPECT_EQ(earlier_lost(ledger, "7"), (Nodes{"n2", "n3", "n4"}));
  EXPECT_EQ(earlier_lost(ledger, "8"), (Nodes{"n9"}));
  EXPECT_TRUE(earlier_lost(ledger, "9").empty());
}

TEST(StepDecide, ChooseNodesKeepsTheHealthyAndTakesTheBatchHostLast) {
  const Nodes allocation = {"b", "n1", "n2", "n3"};
  EXPECT_EQ(choose_nodes({}, allocation, {}, "b", 3), (Nodes{"n1", "n2", "n3"}));
  // n2 lost: the step keeps n1, n3 and takes the batch host as the spare.
  EXPECT_EQ(choose_nodes({"n1", "n2", "n3"}, allocation, {"n2"}, "b", 3), (Nodes{"n1", "n3", "b"}));
  // Two lost, no spare left: what remains.
  EXPECT_EQ(choose_nodes({"n1", "n3", "b"}, allocation, {"n2", "n3"}, "b", 3), (Nodes{"n1", "b"}));
  // The batch host outside the allocation is never taken.
  EXPECT_EQ(choose_nodes({}, {"n1", "n2"}, {}, "b", 3), (Nodes{"n1", "n2"}));
}

TEST(StepDecide, AvoidEarlierWhileEnoughOthersAreLeft) {
  auto k = knobs();
  auto a = avoid_earlier({"b", "n1", "n2", "n3"}, {"n2"}, k);
  EXPECT_EQ(a.avoided, (Nodes{"n2"}));
  EXPECT_EQ(a.message, "hpctrain: not training on n2: lost in an earlier attempt of this job");
  EXPECT_FALSE(a.to_stderr);
  // Only two others for three nodes: used all the same.
  a = avoid_earlier({"b", "n1", "n2"}, {"n2"}, k);
  EXPECT_TRUE(a.avoided.empty());
  EXPECT_EQ(a.message,
            "hpctrain: training on n2 although lost in an earlier attempt: only 2 other nodes");
  EXPECT_TRUE(a.to_stderr);
  // With shrink any node left will do.
  k.policy = spec::OnNodeLoss::kShrink;
  EXPECT_EQ(avoid_earlier({"b", "n1", "n2"}, {"n2"}, k).avoided, (Nodes{"n2"}));
  // Not in the allocation: nothing to say.
  EXPECT_TRUE(avoid_earlier({"b", "n1"}, {"n7"}, k).message.empty());
}

TEST(StepDecide, RecoveryNeedsAFullStepUnlessShrinking) {
  auto k = knobs();
  EXPECT_TRUE(recovers(k, 1, 3));
  EXPECT_FALSE(recovers(k, 1, 2));
  EXPECT_FALSE(recovers(k, 3, 3)) << "past max_node_losses";
  k.policy = spec::OnNodeLoss::kShrink;
  EXPECT_TRUE(recovers(k, 1, 2));
  EXPECT_FALSE(recovers(k, 1, 0));
  k.policy = spec::OnNodeLoss::kRequeue;
  EXPECT_FALSE(recovers(k, 1, 3));
}

TEST(StepDecide, EndReasons) {
  auto k = knobs();
  const auto reason = [&](Ending e) { return std::string(records::name_of(end_reason(k, e))); };
  EXPECT_EQ(reason({true, false, 143, 0, 0, 1, Cause::kCancelled}), "terminated");
  EXPECT_EQ(reason({true, true, 76, 0, 0, 1, Cause::kCancelled}), "terminated");
  EXPECT_EQ(reason({false, true, 76, 0, 0, 1, Cause::kNodeLost}), "node_lost_requeued");
  EXPECT_EQ(reason({false, true, 76, 10, 0, 1, Cause::kNodeLost}), "failed") << "restart limit";
  EXPECT_EQ(reason({false, false, 0, 0, 5, 1, Cause::kCompleted}), "completed");
  EXPECT_EQ(reason({false, false, kExitRequeue, 0, 0, 1, Cause::kPreempted}), "requeued");
  EXPECT_EQ(reason({false, false, kExitRequeue, 10, 0, 1, Cause::kPreempted}), "restart_limit");
  EXPECT_EQ(reason({false, false, 1, 0, 1, 1, Cause::kUnknown}), "failed_requeued");
  EXPECT_EQ(reason({false, false, 1, 0, 2, 1, Cause::kUnknown}), "failed")
      << "max_consecutive_failures";
  k.requeue_enabled = false;
  EXPECT_EQ(reason({false, false, kExitRequeue, 0, 0, 1, Cause::kPreempted}), "restart_limit");
  EXPECT_EQ(reason({false, false, 1, 0, 0, 1, Cause::kUnknown}), "failed");
  // The breaker stops a requeue, and nothing else.
  k = knobs();
  k.max_no_progress = 3;
  EXPECT_EQ(reason({false, false, kExitRequeue, 0, 0, 2, Cause::kPreempted}), "requeued");
  EXPECT_EQ(reason({false, false, kExitRequeue, 0, 0, 3, Cause::kPreempted}), "no_progress");
  EXPECT_EQ(reason({false, true, 76, 0, 0, 3, Cause::kNodeLost}), "no_progress");
  EXPECT_EQ(reason({false, false, 0, 0, 0, 9, Cause::kCompleted}), "completed");
  EXPECT_EQ(reason({false, false, 1, 0, 2, 9, Cause::kUnknown}), "failed");
  EXPECT_TRUE(records::is_requeue(reason_named("failed_requeued")));
  EXPECT_FALSE(records::is_requeue(reason_named("no_progress")));
  // The cause: one of resilience.stop_on ends the run with retries left; an exit 0 without rank 0's
  // end of training (unknown) is retried as a failure, never called completed.
  k = knobs();
  EXPECT_EQ(reason({false, false, kExitBadInput, 0, 0, 1, Cause::kBadInput}), "failed");
  EXPECT_EQ(reason({false, false, kExitDiverged, 0, 0, 1, Cause::kDiverged}), "failed");
  EXPECT_EQ(reason({false, false, 137, 0, 0, 1, Cause::kOom}), "failed");
  EXPECT_EQ(reason({false, false, 1, 0, 0, 1, Cause::kFilesystem}), "failed_requeued");
  EXPECT_EQ(reason({false, false, 0, 0, 0, 1, Cause::kUnknown}), "failed_requeued");
  EXPECT_EQ(reason({false, false, 0, 0, 2, 1, Cause::kUnknown}), "failed");
  k.stop_on = {Cause::kFilesystem};
  EXPECT_EQ(reason({false, false, 1, 0, 0, 1, Cause::kFilesystem}), "failed");
  EXPECT_EQ(reason({false, false, kExitBadInput, 0, 0, 1, Cause::kBadInput}), "failed_requeued")
      << "bad input retried when the user takes it out of stop_on";
  // TERM and a lost node keep their own policies whatever stop_on says.
  k.stop_on = {Cause::kUnknown};
  EXPECT_EQ(reason({true, false, 143, 0, 0, 1, Cause::kUnknown}), "terminated");
}

TEST(StepDecide, ExclusionMustLeaveThePartitionEnoughNodes) {
  EXPECT_TRUE(exclusion_fits(8, 1, 4));
  EXPECT_FALSE(exclusion_fits(4, 1, 4));
  EXPECT_TRUE(exclusion_fits(5, 1, 4));
  EXPECT_FALSE(exclusion_fits(8, 0, 4)) << "nothing to exclude";
  EXPECT_FALSE(exclusion_fits(0, 1, 4)) << "sinfo did not answer";
}

// A verdict's host as the worker names it (gethostname) against Slurm's node names.
TEST(StepDecide, NodeOfHostByNameElseShortName) {
  const Nodes nodes = {"n1", "n2", "gpu3.site"};
  EXPECT_EQ(node_of_host("n2", nodes), "n2");
  EXPECT_EQ(node_of_host("n2.cluster.local", nodes), "n2") << "fully qualified host, short node";
  EXPECT_EQ(node_of_host("gpu3", nodes), "gpu3.site") << "short host, qualified node";
  EXPECT_EQ(node_of_host("gpu3.other", nodes), "gpu3.site");
  EXPECT_FALSE(node_of_host("n9.cluster.local", nodes));
  EXPECT_FALSE(node_of_host("n", nodes));
  EXPECT_FALSE(node_of_host("", nodes));
  // Two nodes of the same short name: neither.
  EXPECT_FALSE(node_of_host("a.x", {"a.y", "a.z"}));
  EXPECT_EQ(node_of_host("a.y", {"a.y", "a.z"}), "a.y");
  // Addresses match only themselves: 127.0.0.5 is not 127.0.0.2.
  EXPECT_FALSE(node_of_host("127.0.0.5", {"127.0.0.2"}));
  EXPECT_EQ(node_of_host("127.0.0.2", {"127.0.0.1", "127.0.0.2"}), "127.0.0.2");
}

// Node names that are prefixes of one another (node1, node10, node100): a host stands for the
// node of exactly its short name, never for one whose name merely begins (or ends) like it, and
// is not ambiguous for having such neighbours.
TEST(StepDecide, NodeOfHostIsNeverMatchedByPrefix) {
  const Nodes nodes = {"node1", "node10", "node100"};
  for (const std::string n : {"node1", "node10", "node100"}) {
    EXPECT_EQ(node_of_host(n + ".cluster.local", nodes), n)
        << "the verdict of " << n << ".cluster.local replaces another node, or none (taken as "
        << "ambiguous)";
    EXPECT_EQ(node_of_host(n, nodes), n);
  }
  // The same with the names the other way round, and listed longest first.
  const Nodes qualified = {"node100.site", "node10.site", "node1.site"};
  for (const std::string n : {"node1", "node10", "node100"}) {
    EXPECT_EQ(node_of_host(n, qualified), n + ".site")
        << "short host " << n << " mapped to the wrong qualified node";
    EXPECT_EQ(node_of_host(n + ".other", qualified), n + ".site");
  }
  EXPECT_FALSE(node_of_host("node", nodes)) << "a prefix of every node is none of them";
  EXPECT_FALSE(node_of_host("node1000.cluster.local", nodes));
  EXPECT_FALSE(node_of_host("ode10", nodes));
}

// The records of metrics.jsonl's `lines` that parse.
std::vector<records::MetricsRecord> records_of(const std::vector<std::string>& lines) {
  std::vector<records::MetricsRecord> out;
  for (const auto& l : lines) {
    if (auto r = records::parse_metrics_line(l)) out.push_back(*r);
  }
  return out;
}

TEST(StepDecide, VerdictsOfThisStepOnly) {
  const auto lines = records_of(
      {R"({"kind":"hang","tag":"0.0","step":2,"hosts":["n1"],"wall_time":5.5,"message":"old"})",
       "not json", R"({"kind":"train","tag":"1.0","step":3})",
       R"({"kind":"started","tag":"1.0","step":3,"wall_time":100.25})",
       R"({"kind":"evict","tag":"1.0","step":5,"hosts":["n2","bad name"],"wall_time":7,)"
       R"("message":"evict: rank 2 (n2) \"slow\" \\ at step 5"})",
       R"({"kind":"hang","tag":7,"step":6,"hosts":["n3"]})"});
  const auto v = find_verdict(lines, "1.0");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->kind, records::MetricsKind::kEvict);
  EXPECT_EQ(v->hosts, (Nodes{"n2"}));
  EXPECT_DOUBLE_EQ(v->wall_time, 7);
  // The message as the worker wrote it: the records' reader unescapes JSON, nothing is stripped.
  EXPECT_EQ(v->message, R"(evict: rank 2 (n2) "slow" \ at step 5)");
  EXPECT_EQ(find_verdict(lines, "0.0")->message, "old");
  EXPECT_FALSE(find_verdict(lines, "2.0"));
  EXPECT_DOUBLE_EQ(find_started(lines, "1.0").value(), 100.25);
  EXPECT_FALSE(find_started(lines, "0.0"));
  // A long message is cut at 240 characters.
  const auto longer = records_of(
      {R"({"kind":"hang","tag":"3.1","step":1,"message":")" + std::string(300, 'x') + R"("})"});
  EXPECT_EQ(find_verdict(longer, "3.1")->message.size(), 240u);
}

// The host a line of output was written on: the worker's prefix (with or without its rank),
// NCCL's "host:pid:tid [dev]"; nothing from other lines.
TEST(HostOfLine, WorkerAndNcclPrefixes) {
  EXPECT_EQ(host_of_line("[rank 2/8 n7.cluster] CUDA error: x"), "n7.cluster");
  EXPECT_EQ(host_of_line("[gpu-07] checkpoint step 5 committed"), "gpu-07");
  EXPECT_EQ(host_of_line("gpu-07:1234:1290 [3] NCCL WARN Cuda failure 'uncorrectable ECC error'"),
            "gpu-07");
  EXPECT_EQ(host_of_line("srun: error: n2: task 2: Exited with exit code 1"), std::nullopt);
  EXPECT_EQ(host_of_line("NVRM: Xid (PCI:0000:3b:00): 79, pid=5, GPU has fallen off the bus."),
            std::nullopt);
  EXPECT_EQ(host_of_line("[rank 2/8 ] x"), std::nullopt);
}

// The node behind the last GPU-hardware line that names one of the step's nodes.
TEST(GpuFault, TheLastHardwareLineNamingANode) {
  const Nodes nodes = {"n1", "n2", "n10"};
  const std::vector<std::string> lines = {
      "[rank 0/4 n1] CUDA error: uncorrectable ECC error encountered",
      "[rank 3/4 n10] CUDA error: uncorrectable ECC error encountered",
      "[rank 1/4 n1] Connection reset by peer",
      "CUDA error: uncorrectable ECC error encountered",
  };
  const auto f = gpu_fault(lines, nodes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->node, "n10");
  EXPECT_EQ(f->line, lines[1]);
  EXPECT_EQ(gpu_fault({lines[2], lines[3]}, nodes), std::nullopt) << "no host, or no GPU fault";
  EXPECT_EQ(gpu_fault({"[rank 0/4 n9] CUDA error: uncorrectable ECC error encountered"}, nodes),
            std::nullopt)
      << "n9 is none of the step's nodes";
}

}  // namespace
}  // namespace hpctrain::supervisor
