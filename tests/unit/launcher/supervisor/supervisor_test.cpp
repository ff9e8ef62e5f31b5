// The step supervisor's sequences against a fake Slurm (launcher/supervisor/supervisor.hpp): the
// one FakeSlurm answers for scontrol, sinfo and squeue and records what was asked, a stand-in probe
// answers for the slurmds;
// a stand-in srun first on PATH plays each step from RUN/play-N.sh and records its argv and
// environment. sbatch_node_loss runs the same through the rendered script with every branch.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <tuple>

#include "common/exit_codes.hpp"
#include "supervisor/supervisor.hpp"
#include "support/test_util.hpp"
#include "unit/launcher/slurm/fake_slurm.hpp"

namespace hpctrain::supervisor {
namespace {

using test::read_text;
using test::TempDir;
using test::write_text;

constexpr const char* kSrun = R"(#!/bin/bash
n=$(( $(cat "$RUN/srun.count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$RUN/srun.count"
printf '%s\n' "$@" > "$RUN/srun-$n.argv"
echo "$HPCTRAIN_WORLD_SIZE $HPCTRAIN_STEP_TAG" > "$RUN/srun-$n.env"
date +%s.%N > "$RUN/srun-$n.time"
# finished: what a worker leaves at the end of training (a committed checkpoint whose trainer.json
# says finished), then exit 0: without it, an exit 0 is no completed run.
finished() {
  mkdir -p "$RUN/checkpoints/step-000000099"
  echo '{"finished": true}' > "$RUN/checkpoints/step-000000099/trainer.json"
  : > "$RUN/checkpoints/step-000000099/manifest.json"
  exit 0
}
source "$RUN/play-$n.sh"
)";

using Failure = test::FakeSlurm::Failure;

// The slurmds as the stand-in probe finds them: node N is lost while RUN/lost-N (refused) or
// RUN/silent-N (no answer) exists; RUN/once-N makes one probe find it refused and is then removed.
Unanswered probe_files(const std::string& run_dir, const Nodes& nodes) {
  Unanswered dead;
  for (const auto& n : nodes) {
    if (test::fs::exists(run_dir + "/lost-" + n))
      dead.emplace_back(n, records::LossCause::kRefused);
    if (test::fs::exists(run_dir + "/silent-" + n))
      dead.emplace_back(n, records::LossCause::kSilent);
    if (test::fs::remove(run_dir + "/once-" + n))
      dead.emplace_back(n, records::LossCause::kRefused);
  }
  return dead;
}

class Supervise : public ::testing::Test {
 protected:
  void SetUp() override {
    write_text(dir_ / "bin" / "srun", kSrun);
    test::fs::permissions(dir_ / "bin" / "srun", test::fs::perms::owner_all);
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "";
    ::setenv("PATH", (dir_.file("bin") + ":" + saved_path_).c_str(), 1);
    ::setenv("RUN", run_dir().c_str(), 1);
    slurm_.allocation = {"b", "n1", "n2", "n3"};
    slurm_.add_partition("p", 8);
    // RUN/killed tells a play that the step's tasks were killed.
    slurm_.on_kill_step = [this](const std::string& id) {
      write_text(dir_ / "run" / "killed", id);
    };
    g_terminated = 0;
    spec_.job.nodes = 3;
    spec_.job.tasks_per_node = 2;
    spec_.job.cpus_per_task = 1;
    spec_.job.worker = "/opt/worker";
    spec_.preemption.enabled = true;
    spec_.preemption.max_restarts = 5;
    spec_.preemption.max_consecutive_failures = 3;
    spec_.resilience.spare_nodes = 1;
    spec_.resilience.on_node_loss = spec::OnNodeLoss::kAuto;
    spec_.resilience.max_node_losses = 2;
    spec_.resilience.heartbeat_timeout_s = 2;
    spec_.resilience.hang_grace_s = 90;
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    g_terminated = 0;
  }

  std::string run_dir() const { return dir_.file("run"); }
  void play(int n, const std::string& text) {
    write_text(dir_ / "run" / ("play-" + std::to_string(n) + ".sh"), text);
  }
  int run() {
    AttemptContext c;
    c.task_dir = run_dir();
    c.spec_file = run_dir() + "/spec.toml";
    c.job = job_;
    c.slurm_job_id = job_;
    c.restart = restart_;
    c.nodes = "b,n[1-3]";
    c.started = "2026-11-26T00:00:00Z";
    c.batch_host = "b";
    c.partition = partition_;
    c.job_nodes = 4;
    if (array_task_) {
      c.job = job_ + "_" + std::to_string(*array_task_);
      c.array_task = array_task_;
    }
    return supervise(c, supervisor_options_from_spec(spec_, c.spec_file), slurm_,
                     [this](const Nodes& nodes, int port, auto) {
                       EXPECT_EQ(port, 6818);
                       ++probes_;
                       return probe_files(run_dir(), nodes);
                     });
  }
  std::vector<nlohmann::json> ledger() const {
    std::vector<nlohmann::json> out;
    std::istringstream in(read_text(dir_ / "run" / "attempts.jsonl"));
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  // Another attempt of the job from scratch: no step, no ledger, no node lost.
  void start_over() {
    slurm_.calls.clear();
    for (const char* name : {"srun.count", "attempts.jsonl", "lost-n2", "killed"}) {
      test::fs::remove(dir_ / "run" / name);
    }
  }
  std::string argv(int n) const {
    return read_text(dir_ / "run" / ("srun-" + std::to_string(n) + ".argv"));
  }

  // When step n started (the stand-in srun's clock), Unix seconds.
  double started(int n) const {
    return std::stod(read_text(dir_ / "run" / ("srun-" + std::to_string(n) + ".time")));
  }

  TempDir dir_;
  std::string saved_path_;
  test::FakeSlurm slurm_;
  int64_t probes_ = 0;
  std::string partition_ = "p";
  spec::Spec spec_;
  std::optional<int64_t> array_task_;
  std::string job_ = "7";  // the job attempt's job id and restart (a chain's next job: others)
  int64_t restart_ = 0;
};

// A play's step until the supervisor kills its tasks (then srun ends, as it would), at most 30 s.
constexpr const char* kUntilKilled =
    "for i in $(seq 300); do [ -e \"$RUN/killed\" ] && exit 137; sleep 0.1; done; exit 1";

// The ledger's "detected" ("2026-11-26T10:02:03.456Z") as Unix seconds.
double unix_ms_text(const nlohmann::json& text) {
  std::tm tm{};
  int ms = 0;
  const std::string s = text.get<std::string>();
  EXPECT_EQ(std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon,
                        &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms),
            7)
      << s;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<double>(timegm(&tm)) + ms / 1000.0;
}

// A verdict record of step 0.0 as the workers' rank 0 writes it, naming `host`.
std::string verdict_play(const std::string& kind, const std::string& host, int status) {
  return "printf '{\"kind\":\"" + kind +
         "\",\"tag\":\"0.0\",\"step\":5,\"ranks\":[2,3],"
         "\"hosts\":[\"" +
         host + "\"],\"message\":\"" + kind + ": rank 2 (" + host +
         ")\",\"wall_time\":%s}\\n' \"$(date +%s.%N)\" >> \"$RUN/metrics.jsonl\"; exit " +
         std::to_string(status);
}

TEST_F(Supervise, CompletedStepOnTheChosenNodes) {
  play(1, "finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["reason"], "completed");
  EXPECT_EQ(l[0]["world_size"], 6);
  EXPECT_EQ(l[0]["nodes"], "n1,n2,n3");
  EXPECT_EQ(l[0]["job_id"], "7");
  EXPECT_EQ(l[0]["last_step"], 99);
  EXPECT_EQ(l[0]["cause"], "completed");
  EXPECT_EQ(argv(1),
            "--kill-on-bad-exit=1\n--nodes=3\n--ntasks=6\n--ntasks-per-node=2\n"
            "--nodelist=n1,n2,n3\n--cpus-per-task=1\n/opt/worker\n--spec\n" +
                run_dir() + "/spec.toml\n");
  EXPECT_EQ(read_text(dir_ / "run" / "srun-1.env"), "6 0.0\n");
  EXPECT_TRUE(slurm_.calls.empty());
}

TEST_F(Supervise, RequeuedAfterACheckpointAndRefusedRequeueKeepsTheStatus) {
  play(1,
       "mkdir -p \"$RUN/checkpoints/step-000000012\"; : > "
       "\"$RUN/checkpoints/step-000000012/manifest.json\"; exit 75");
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
  EXPECT_EQ(ledger().back()["reason"], "requeued");
  EXPECT_EQ(ledger().back()["last_step"], 12);
  // The cluster refuses: the job ends with the worker's status, the ledger still says requeued.
  slurm_.failing["requeue"] = Failure::kRefused;
  test::fs::remove(dir_ / "run" / "srun.count");
  EXPECT_EQ(run(), kExitRequeue);
  EXPECT_EQ(ledger().size(), 2u);
}

// The no-progress breaker (2) over the ledger and the checkpoints on disk: the first attempt
// commits step 12 and made progress; the second and third commit nothing new, and the third is
// not requeued (no_progress, the worker's status).
TEST_F(Supervise, NoProgressBreakerCountsFromTheFirstAttemptsCheckpoint) {
  spec_.preemption.max_attempts_without_progress = 2;
  play(1,
       "mkdir -p \"$RUN/checkpoints/step-000000012\"; : > "
       "\"$RUN/checkpoints/step-000000012/manifest.json\"; exit 75");
  EXPECT_EQ(run(), 0);
  play(1, "exit 75");
  test::fs::remove(dir_ / "run" / "srun.count");
  EXPECT_EQ(run(), 0) << "one attempt without progress";
  test::fs::remove(dir_ / "run" / "srun.count");
  EXPECT_EQ(run(), kExitRequeue);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7", "requeue 7"}));
  std::vector<std::string> reasons;
  for (const auto& l : ledger()) {
    reasons.push_back(l["reason"]);
    EXPECT_EQ(l["last_step"], 12);
  }
  EXPECT_EQ(reasons, (std::vector<std::string>{"requeued", "requeued", "no_progress"}));
}

// Where Slurm refuses the requeue (JobRequeue=0, --no-requeue, a partition that forbids it), the
// next job of a chain continues the run: submitted after this one, counting its attempts on, the
// nodes lost so far excluded; submissions.jsonl names it, so status and cancel follow the run.
TEST_F(Supervise, RefusedRequeueChainsTheNextJob) {
  slurm_.failing["requeue"] = Failure::kRefused;
  spec_.preemption.chain = true;
  spec_.resilience.max_node_losses = 0;
  play(1, "touch \"$RUN/lost-n2\"; exit 76");
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(
      slurm_.calls,
      (std::vector<std::string>{
          "requeue 7", "submit job.sbatch after=7 export=HPCTRAIN_CHAIN_RESTART=1 exclude=n2"}))
      << "the next job of the chain must start after job 7 has ended (afterany), without the "
         "lost node";
  EXPECT_EQ(ledger().back()["reason"], "node_lost_chained") << "a chained attempt called requeued";
  EXPECT_EQ(ledger().back()["excluded"], "n2") << "what the next job excludes";
  const auto last = records::last_submission(run_dir());
  ASSERT_TRUE(last);
  EXPECT_EQ(last->job_id, "8");
  EXPECT_EQ(last->chained_from, "7");
  // sbatch refused too: the job ends with its status, saying so.
  slurm_.calls.clear();
  slurm_.next_job.reset();
  play(1, "exit 75");
  test::fs::remove(dir_ / "run" / "srun.count");
  EXPECT_EQ(run(), kExitRequeue);
  EXPECT_EQ(ledger().back()["reason"], "requeued") << "no chain was submitted";
  // With preemption.chain off, no chain (an array task: RefusedRequeueOfAnArrayTaskDoesNotChain).
  spec_.preemption.chain = false;
  slurm_.calls.clear();
  test::fs::remove(dir_ / "run" / "srun.count");
  EXPECT_EQ(run(), kExitRequeue);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
}

// A run that Slurm never requeues, continued by a chain of three jobs (7, 8, 9): each job's
// supervisor is asked to requeue, is refused and submits the next job, which starts only once
// the one before has ended (afterany) and counts its attempt on. The ledger calls the first two
// attempts chained, each on its own job, never requeued: no requeue happened.
TEST_F(Supervise, AChainOfThreeJobsIsRecordedAsAChain) {
  slurm_.failing["requeue"] = Failure::kRefused;
  spec_.preemption.chain = true;
  play(1, "exit 75");
  for (const auto& [job, next] : {std::pair{"7", "8"}, std::pair{"8", "9"}}) {
    job_ = job;
    slurm_.next_job = next;
    test::fs::remove(dir_ / "run" / "srun.count");
    EXPECT_EQ(run(), 0) << "job " << job << " ended with the worker's status";
    ++restart_;
  }
  job_ = "9";
  play(1, "finished");
  test::fs::remove(dir_ / "run" / "srun.count");
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(slurm_.calls,
            (std::vector<std::string>{
                "requeue 7", "submit job.sbatch after=7 export=HPCTRAIN_CHAIN_RESTART=1",
                "requeue 8", "submit job.sbatch after=8 export=HPCTRAIN_CHAIN_RESTART=2"}))
      << "a chain's next job must wait for the one it continues (--dependency=afterany:JOB)";
  const auto l = ledger();
  ASSERT_EQ(l.size(), 3u) << read_text(dir_ / "run" / "attempts.jsonl");
  const std::vector<std::tuple<std::string, int, std::string>> want = {
      {"7", 0, "chained"}, {"8", 1, "chained"}, {"9", 2, "completed"}};
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [job, restart, reason] = want[i];
    EXPECT_EQ(l[i]["job_id"], job) << "ledger line " << i + 1;
    EXPECT_EQ(l[i]["restart"], restart) << "ledger line " << i + 1;
    EXPECT_EQ(l[i]["reason"], reason) << "ledger line " << i + 1 << " (job " << job
                                      << "): an attempt the next job of a chain continued is "
                                         "not called chained";
  }
  const auto chain = records::last_chain(records::read_submissions(run_dir()));
  ASSERT_EQ(chain.size(), 2u) << "the submit itself is hpctrain submit's, not here";
  EXPECT_EQ(chain[0].job_id, "8");
  EXPECT_EQ(chain[1].chained_from, "8");
}

// Failures count across the jobs of a chain as across requeues: with
// max_consecutive_failures = 2, the third failure in a row ends the run (failed), and no further
// job is submitted.
TEST_F(Supervise, FailuresCountAcrossAChain) {
  slurm_.failing["requeue"] = Failure::kRefused;
  spec_.preemption.chain = true;
  spec_.preemption.max_consecutive_failures = 2;
  play(1, "exit 1");
  std::vector<std::string> reasons;
  for (const char* job : {"7", "8", "9"}) {
    job_ = job;
    test::fs::remove(dir_ / "run" / "srun.count");
    run();
    reasons.push_back(ledger().back()["reason"]);
    ++restart_;
  }
  EXPECT_EQ(reasons, (std::vector<std::string>{"failed_chained", "failed_chained", "failed"}))
      << "a chain's failures called requeued, or not counted against max_consecutive_failures";
  EXPECT_EQ(std::count_if(slurm_.calls.begin(), slurm_.calls.end(),
                          [](const std::string& c) { return c.rfind("submit ", 0) == 0; }),
            2);
}

TEST_F(Supervise, LostNodeReplacedByTheBatchHost) {
  play(1, "touch \"$RUN/lost-n2\"; sleep 30");
  play(2, "rm -f \"$RUN/lost-n2\"; finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]["reason"], "node_lost");
  EXPECT_EQ(l[0]["cause"], "node_lost");
  EXPECT_EQ(l[0]["loss_kind"], "refused");
  EXPECT_EQ(l[0]["evidence"], "slurmd on n2 refused the connection");
  EXPECT_EQ(l[0]["lost_nodes"], "n2");
  EXPECT_EQ(l[0]["added_nodes"], "b");
  EXPECT_EQ(l[0]["nodes"], "n1,n2,n3");
  EXPECT_EQ(l[0]["exit_status"], 137) << "srun killed 3 s after the step's tasks";
  EXPECT_LT(l[0]["stop_s"].get<double>(), 10);
  EXPECT_TRUE(l[0].contains("recover_s"));
  EXPECT_EQ(l[1]["reason"], "completed");
  EXPECT_EQ(l[1]["nodes"], "n1,n3,b");
  EXPECT_EQ(l[1]["step"], 1);
  EXPECT_NE(argv(2).find("--nodelist=n1,n3,b\n--overlap\n"), std::string::npos) << argv(2);
  EXPECT_EQ(read_text(dir_ / "run" / "srun-2.env"), "6 0.1\n");
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"kill 7.0"}));
}

TEST_F(Supervise, LossPastTheLimitRequeuesWithTheNodeExcludedIfThePartitionAllows) {
  spec_.resilience.max_node_losses = 0;
  play(1, "touch \"$RUN/lost-n2\"; exit 76");
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7", "exclude 7 n2"}));
  auto l = ledger();
  EXPECT_EQ(l.back()["reason"], "node_lost_requeued");
  EXPECT_EQ(l.back()["excluded"], "n2");
  EXPECT_EQ(l.back()["exit_status"], kExitPeerLost);
  // A partition of 4 nodes for a job of 4: excluding one would leave it pending forever.
  // (start_over: else n2 is avoided as lost before, or found lost before the step, unwatched.)
  start_over();
  slurm_.partition_list.clear();
  slurm_.add_partition("p", 4);
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
  EXPECT_EQ(ledger().back()["reason"], "node_lost_requeued");
  EXPECT_FALSE(ledger().back().contains("excluded"));
}

TEST_F(Supervise, TerminatedBeforeTheStepOrWhileItStarted) {
  play(1, "finished");
  g_terminated = 1;
  EXPECT_EQ(run(), 143);
  EXPECT_FALSE(test::fs::exists(dir_ / "run" / "srun.count")) << "a step started after TERM";
  EXPECT_EQ(ledger().back()["reason"], "terminated");
  // srun returned 0, but the job is no longer RUNNING: it is being cancelled.
  g_terminated = 0;
  slurm_.state = "COMPLETING";
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(ledger().back()["reason"], "terminated");
  EXPECT_TRUE(slurm_.calls.empty());
}

// The workers name their hosts as gethostname(2) does, which may be fully qualified where Slurm's
// node names are short: the hang verdict's host is the step's node of that short name, replaced
// by the spare as any lost node (not an ordinary failure that requeues the job).
TEST_F(Supervise, HangVerdictWithFullyQualifiedHostReplacesTheNode) {
  play(1, verdict_play("hang", "n2.cluster.local", kExitHang));
  play(2, "finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 2u) << read_text(dir_ / "run" / "attempts.jsonl");
  EXPECT_EQ(l[0]["reason"], "node_lost");
  EXPECT_EQ(l[0]["cause"], "hang");
  EXPECT_EQ(l[0]["lost_nodes"], "n2");
  EXPECT_EQ(l[0]["added_nodes"], "b");
  EXPECT_EQ(l[0]["exit_status"], kExitHang);
  EXPECT_EQ(l[1]["reason"], "completed");
  EXPECT_EQ(l[1]["nodes"], "n1,n3,b");
  EXPECT_TRUE(slurm_.calls.empty()) << "no requeue";
}

// The same for a straggler's eviction: the evicted node does not come back in the next step.
TEST_F(Supervise, EvictVerdictWithFullyQualifiedHostReplacesTheNode) {
  play(1, verdict_play("evict", "n3.cluster.local", kExitEvict));
  play(2, "finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 2u) << read_text(dir_ / "run" / "attempts.jsonl");
  EXPECT_EQ(l[0]["reason"], "node_lost");
  EXPECT_EQ(l[0]["cause"], "straggler");
  EXPECT_EQ(l[0]["lost_nodes"], "n3");
  EXPECT_EQ(l[1]["nodes"], "n1,n2,b");
  EXPECT_TRUE(slurm_.calls.empty()) << "no requeue";
}

// A node the replay on divergence found computing wrong results ("corrupt", exit 78 as for an
// eviction): replaced, its cause hardware, its loss kind corruption.
TEST_F(Supervise, CorruptVerdictReplacesTheNodeAsHardware) {
  play(1, verdict_play("corrupt", "n2", kExitEvict));
  play(2, "finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 2u) << read_text(dir_ / "run" / "attempts.jsonl");
  EXPECT_EQ(l[0]["reason"], "node_lost");
  EXPECT_EQ(l[0]["cause"], "gpu_hardware");
  EXPECT_EQ(l[0]["loss_kind"], "corruption");
  EXPECT_EQ(l[0]["lost_nodes"], "n2");
  EXPECT_EQ(l[1]["nodes"], "n1,n3,b");
  EXPECT_TRUE(slurm_.calls.empty()) << "no requeue";
}

// Node names that are prefixes of one another (n1, n10, n100): a verdict's fully qualified host
// replaces the node of exactly its short name, never one whose name begins like it, and is not
// taken as ambiguous (which would leave the hung or slow node in the next step).
TEST_F(Supervise, VerdictHostReplacesItsOwnNodeNotOneNamedLikeIt) {
  slurm_.allocation = {"b", "n1", "n10", "n100", "n2"};
  struct Case {
    std::string kind, node, next_nodes;
  };
  for (const auto& c : {Case{"hang", "n10", "n1,n100,n2"}, Case{"evict", "n1", "n10,n100,n2"},
                        Case{"hang", "n100", "n1,n10,n2"}}) {
    start_over();
    test::fs::remove(dir_ / "run" / "metrics.jsonl");
    const std::string host = c.node + ".cluster.local";
    play(1, verdict_play(c.kind, host, c.kind == "hang" ? kExitHang : kExitEvict));
    play(2, "finished");
    EXPECT_EQ(run(), 0);
    const auto l = ledger();
    ASSERT_EQ(l.size(), 2u) << "the " << c.kind << " verdict of " << host
                            << " replaced no node: " << read_text(dir_ / "run" / "attempts.jsonl");
    EXPECT_EQ(l[0]["lost_nodes"], c.node)
        << "the " << c.kind << " verdict of " << host << " replaced the wrong node";
    EXPECT_EQ(l[1]["nodes"], c.next_nodes) << host << "'s node is still in the next step";
    EXPECT_TRUE(slurm_.calls.empty()) << "no requeue";
  }
}

// A host that is none of the step's nodes, even by its short name, names no node: the step's
// failure is an ordinary one (requeued, counted as a failure).
TEST_F(Supervise, VerdictOnAnUnknownHostIsAnOrdinaryFailure) {
  play(1, verdict_play("hang", "n9.cluster.local", kExitHang));
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["reason"], "failed_requeued");
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
}

// fd 2 a regular file, as the batch job's is (the step supervisor reads the step's lines back from
// it), while the object lives.
class StderrToFile {
 public:
  explicit StderrToFile(const std::string& path) : saved_(::dup(2)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 2);
    ::close(fd);
  }
  ~StderrToFile() {
    ::dup2(saved_, 2);
    ::close(saved_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;

 private:
  int saved_;
};

// A GPU that failed: the node of the worker's line saying so is replaced as a lost one (cause
// gpu_hardware, loss_kind gpu_hardware), not the job retried on the same GPU.
TEST_F(Supervise, AGpuFaultReplacesTheNodeItsLineNames) {
  const StderrToFile err(dir_.file("batch.err"));
  play(1,
       "echo '[rank 2/4 n2.cluster.local] train.cpp:88: CUDA error: uncorrectable ECC error "
       "encountered' >&2; echo 'srun: error: n2: task 2: Exited with exit code 1' >&2; exit 1");
  play(2, "finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 2u) << read_text(dir_ / "run" / "attempts.jsonl");
  EXPECT_EQ(l[0]["reason"], "node_lost");
  EXPECT_EQ(l[0]["cause"], "gpu_hardware");
  EXPECT_EQ(l[0]["loss_kind"], "gpu_hardware");
  EXPECT_EQ(l[0]["lost_nodes"], "n2");
  EXPECT_EQ(l[0]["added_nodes"], "b");
  EXPECT_NE(l[0]["detected_by"].get<std::string>().find("GPU hardware: [rank 2/4 n2.cluster"),
            std::string::npos)
      << l[0]["detected_by"];
  EXPECT_EQ(l[1]["reason"], "completed");
  EXPECT_EQ(l[1]["nodes"], "n1,n3,b");
  EXPECT_TRUE(slurm_.calls.empty()) << "no requeue";
}

// A GPU failure whose line names no node of the step (or no host at all) is retried as any
// failure, recorded gpu_hardware.
TEST_F(Supervise, AGpuFaultNamingNoNodeOfTheStepIsAnOrdinaryFailure) {
  const StderrToFile err(dir_.file("batch.err"));
  play(1, "echo '[rank 2/4 n9] CUDA error: uncorrectable ECC error encountered' >&2; exit 1");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["reason"], "failed_requeued");
  EXPECT_EQ(l[0]["cause"], "gpu_hardware");
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
}

// Only a node that fails two probes half a second apart is lost: a slurmd that misses one (busy,
// restarting) costs the step nothing.
TEST_F(Supervise, ASlurmdMissingOneProbeIsNoLoss) {
  play(1, "touch \"$RUN/once-n2\"; sleep 3; finished");
  EXPECT_EQ(run(), 0);
  EXPECT_FALSE(test::fs::exists(dir_ / "run" / "once-n2")) << "no probe came during the step";
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u) << read_text(dir_ / "run" / "attempts.jsonl");
  EXPECT_EQ(l[0]["reason"], "completed");
  EXPECT_EQ(read_text(dir_ / "run" / "srun.count"), "1\n") << "a second step";
  EXPECT_TRUE(slurm_.calls.empty()) << "the step was killed";
}

// The fence: a silent node's ranks may still run, cut off, until their heartbeat timeout (2 s
// here) and rank 0 a beat later: the next step starts no sooner than the timeout + 5 s after the
// detection. A node that refused the connection is not waited for.
TEST_F(Supervise, SilentNodeFencedRefusingNodeNot) {
  play(1, std::string("touch \"$RUN/silent-n2\"; ") + kUntilKilled);
  play(2, "rm -f \"$RUN/silent-n2\"; finished");
  EXPECT_EQ(run(), 0);
  auto l = ledger();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]["loss_kind"], "silent");
  EXPECT_GE(started(2) - unix_ms_text(l[0]["detected"]), 7.0)
      << "silent: the new step started inside the fence";

  test::fs::remove(dir_ / "run" / "srun.count");
  test::fs::remove(dir_ / "run" / "attempts.jsonl");
  test::fs::remove(dir_ / "run" / "killed");
  play(1, std::string("touch \"$RUN/lost-n2\"; ") + kUntilKilled);
  play(2, "rm -f \"$RUN/lost-n2\"; finished");
  EXPECT_EQ(run(), 0);
  l = ledger();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]["loss_kind"], "refused");
  // 0.2 s or so; the fence would make it 7.
  EXPECT_LT(started(2) - unix_ms_text(l[0]["detected"]), 5.0) << "refused: the new step waited";
}

// An array task does not chain where the requeue is refused (docs/preemption.md): it ends with
// the worker's status, and no next job is submitted.
TEST_F(Supervise, RefusedRequeueOfAnArrayTaskDoesNotChain) {
  slurm_.failing["requeue"] = Failure::kRefused;
  spec_.preemption.chain = true;
  array_task_ = 2;
  play(1, "exit 75");
  EXPECT_EQ(run(), kExitRequeue);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7_2"}));
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["reason"], "requeued");
  EXPECT_EQ(l[0]["array_task_id"], 2);
  EXPECT_FALSE(records::last_submission(run_dir()));
}

// No controller answers at all: the supervisor cannot watch the nodes (no names, no port), runs the
// step on the whole allocation, and of everything that changes Slurm only asks for the requeue,
// which got no answer: no chain follows (the requeue may have taken effect: two jobs would then
// share the run directory).
TEST_F(Supervise, UnreachableControllerChangesNothing) {
  slurm_.fail_all(Failure::kUnreachable);
  spec_.preemption.chain = true;
  play(1, "touch \"$RUN/lost-n2\"; exit 75");
  ::testing::internal::CaptureStderr();
  const int status = run();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kExitRequeue);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
  EXPECT_EQ(probes_, 0) << "nodes probed without their names";
  EXPECT_EQ(argv(1).find("--nodelist"), std::string::npos) << argv(1);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["reason"], "requeued");
  EXPECT_NE(err.find("no Slurm controller was reachable (fake: hostnames)"), std::string::npos)
      << err;
  EXPECT_NE(err.find("scontrol requeue 7 got no answer"), std::string::npos) << err;
  EXPECT_NE(err.find("no chain is submitted"), std::string::npos) << err;
}

// The requeue alone gets no answer: no chain, where a refusal chains
// (RefusedRequeueChainsTheNextJob).
TEST_F(Supervise, UnansweredRequeueSubmitsNoChain) {
  slurm_.failing["requeue"] = Failure::kUnreachable;
  spec_.preemption.chain = true;
  play(1, "exit 75");
  EXPECT_EQ(run(), kExitRequeue);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
  EXPECT_FALSE(records::last_submission(run_dir()));
}

// ExcNodeList after the requeue: a refusal is asked again (8 times in all, as Slurm may not have
// made the job pending yet); no answer is not, as the next try would wait as long again.
TEST_F(Supervise, ExclusionRetriedWhenRefusedNotWhenUnanswered) {
  spec_.resilience.max_node_losses = 0;
  const std::vector<std::string> once = {"requeue 7", "exclude 7 n2"};
  play(1, "touch \"$RUN/lost-n2\"; exit 76");
  slurm_.failing["exclude_nodes"] = Failure::kRefused;
  EXPECT_EQ(run(), 0);
  ASSERT_EQ(slurm_.calls.size(), 9u);
  for (size_t i = 1; i < 9; ++i) EXPECT_EQ(slurm_.calls[i], "exclude 7 n2");
  start_over();
  slurm_.failing["exclude_nodes"] = Failure::kUnreachable;
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(slurm_.calls, once);
}

// sinfo refused or unanswered: the partition's size is unknown, and nothing is excluded (the job
// might pend forever); the requeue goes ahead.
TEST_F(Supervise, UnknownPartitionSizeExcludesNothing) {
  spec_.resilience.max_node_losses = 0;
  for (const auto how : {Failure::kRefused, Failure::kUnreachable}) {
    start_over();
    slurm_.failing["partitions"] = how;
    play(1, "touch \"$RUN/lost-n2\"; exit 76");
    EXPECT_EQ(run(), 0);
    EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
    EXPECT_EQ(ledger().back()["reason"], "node_lost_requeued");
    EXPECT_FALSE(ledger().back().contains("excluded"));
  }
  // The job's partition is found by its name (p: too small); without one (SLURM_JOB_PARTITION
  // unset), the default partition counts (big).
  slurm_.failing.clear();
  slurm_.partition_list.clear();
  slurm_.add_partition("p", 4);
  slurm_.add_partition("big", 8, /*is_default=*/true);
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"p", {"requeue 7"}}, {"", {"requeue 7", "exclude 7 n2"}}};
  for (const auto& [partition, calls] : cases) {
    partition_ = partition;
    start_over();
    EXPECT_EQ(run(), 0);
    EXPECT_EQ(slurm_.calls, calls) << "partition '" << partition << "'";
  }
}

// The step's ids unknown (squeue unanswered): the lost node's step is still stopped, by killing
// srun 3 s later, and the node replaced.
TEST_F(Supervise, UnknownStepIdsStillStopTheStep) {
  slurm_.failing["step_ids"] = Failure::kUnreachable;
  play(1, "touch \"$RUN/lost-n2\"; sleep 30");
  play(2, "rm -f \"$RUN/lost-n2\"; finished");
  EXPECT_EQ(run(), 0);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]["reason"], "node_lost");
  EXPECT_EQ(l[0]["exit_status"], 137);
  EXPECT_EQ(l[1]["reason"], "completed");
  EXPECT_TRUE(slurm_.calls.empty()) << "a step killed through Slurm";
}

// The job's state unknown (squeue refused or unanswered) counts as still running: the attempt
// ends as its step did.
TEST_F(Supervise, UnknownJobStateCountsAsRunning) {
  slurm_.state = "COMPLETING";
  for (const auto how : {Failure::kRefused, Failure::kUnreachable}) {
    slurm_.failing["query"] = how;
    test::fs::remove(dir_ / "run" / "srun.count");
    play(1, "finished");
    EXPECT_EQ(run(), 0);
    EXPECT_EQ(ledger().back()["reason"], "completed");
  }
}

TEST_F(Supervise, SetupFailureLine) {
  AttemptContext c;
  c.task_dir = run_dir();
  c.job = "9_2";
  c.array_task = 2;
  c.nodes = "?";
  c.started = "2026-11-26T00:00:00Z";
  c.restart = 3;
  test::fs::create_directories(run_dir());
  record_setup_failure(c, 2, records::Reason::kSetupFailed, 6);
  const auto l = ledger();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["reason"], "setup_failed");
  EXPECT_EQ(l[0]["array_task_id"], 2);
  EXPECT_EQ(l[0]["restart"], 3);
  EXPECT_EQ(l[0]["world_size"], 6);
  EXPECT_EQ(l[0]["exit_status"], 2);
}

}  // namespace
// srun's --kill-on-bad-exit killed the ranks that had not yet exited 75 when the first one had:
// srun reports their signal, but rank 0 said it checkpointed to be requeued: a requeue. The same
// status without rank 0's word is a failure.
TEST_F(Supervise, RanksKilledAfterTheFirstExited75AreARequeue) {
  const StderrToFile err(dir_.file("batch.err"));
  play(1,
       "mkdir -p \"$RUN/checkpoints/step-000000012\"; : > "
       "\"$RUN/checkpoints/step-000000012/manifest.json\"; echo '[rank 0/6 n1] hpctrain-worker "
       "ended: preempted (exit status 75): checkpointed at step 12 after a stop signal' >&2; "
       "exit 143");
  EXPECT_EQ(run(), 0);
  EXPECT_EQ(slurm_.calls, (std::vector<std::string>{"requeue 7"}));
  EXPECT_EQ(ledger().back()["reason"], "requeued");
  EXPECT_EQ(ledger().back()["cause"], "preempted");
}

TEST_F(Supervise, AKilledStepWithoutRankZerosWordIsNoRequeue) {
  const StderrToFile err(dir_.file("batch.err"));
  play(1, "echo '[rank 3/6 n2] Segmentation fault' >&2; exit 143");
  run();
  EXPECT_EQ(ledger().back()["reason"], "failed_requeued");
}

}  // namespace hpctrain::supervisor
