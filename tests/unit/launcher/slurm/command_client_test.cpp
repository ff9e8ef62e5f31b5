// The Slurm layer's command implementation (slurm/client.hpp) against stand-ins for Slurm's
// programs first on PATH: the argv of each command, what it makes of the answers, and a refusal
// told apart from a controller that does not answer, for every command the CLI and the step
// supervisor run. tests/slurm runs the same against a real cluster.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "slurm/client.hpp"
#include "support/test_util.hpp"

namespace hpctrain::slurm {
namespace {

using namespace std::chrono_literals;
using test::read_text;
using test::TempDir;
using test::write_text;

// Every Slurm program: records "NAME ARGS" in $STANDIN/calls, sleeps $STANDIN/NAME.sleep seconds,
// prints $STANDIN/NAME.out and NAME.err, exits with $STANDIN/NAME.status (0).
constexpr const char* kStandIn = R"SH(#!/bin/bash
name=${0##*/}
echo "$name $*" >> "$STANDIN/calls"
[[ -f $STANDIN/$name.sleep ]] && /bin/sleep "$(< "$STANDIN/$name.sleep")"
[[ -f $STANDIN/$name.out ]] && /bin/cat "$STANDIN/$name.out"
[[ -f $STANDIN/$name.err ]] && /bin/cat "$STANDIN/$name.err" >&2
[[ -f $STANDIN/$name.status ]] && exit "$(< "$STANDIN/$name.status")"
exit 0
)SH";

constexpr const char* kUnreachable =
    "scontrol: error: Unable to contact slurm controller (connect failure)\n";

class CommandClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name :
         {"sbatch", "squeue", "sacct", "scancel", "scontrol", "sinfo", "sacctmgr", "srun"}) {
      write_text(dir_ / "bin" / name, kStandIn);
      ::chmod((dir_ / "bin" / name).c_str(), 0755);
    }
    test::fs::create_directories(dir_ / "standin");
    saved_path_ = std::getenv("PATH");
    if (const char* conf = std::getenv("SLURM_CONF")) saved_conf_ = conf;
    ::unsetenv("SLURM_CONF");
    // The stand-ins alone, but for timeout(1), which kill_step runs scancel under.
    ::setenv("PATH", (dir_.file("bin") + ":/usr/bin:/bin").c_str(), 1);
    ::setenv("STANDIN", dir_.file("standin").c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    if (saved_conf_) ::setenv("SLURM_CONF", saved_conf_->c_str(), 1);
  }

  // What `program` answers: its stdout, stderr and exit status.
  void answer(const std::string& program, const std::string& out, const std::string& err = "",
              int status = 0) {
    write_text(dir_ / "standin" / (program + ".out"), out);
    write_text(dir_ / "standin" / (program + ".err"), err);
    write_text(dir_ / "standin" / (program + ".status"), std::to_string(status));
  }
  std::string calls() const {
    const auto file = dir_ / "standin" / "calls";
    return test::fs::exists(file) ? read_text(file) : std::string();
  }

  TempDir dir_;
  std::string saved_path_;
  std::optional<std::string> saved_conf_;
  std::unique_ptr<SlurmClient> client_ = make_command_client({5s, 3s});
};

TEST_F(CommandClientTest, SubmitWithAndWithoutTheChainsOptions) {
  answer("sbatch", "8;cluster\n");
  EXPECT_EQ(client_->submit("/runs/a/job.sbatch", {}), "8");
  EXPECT_EQ(client_->submit("/runs/a/job.sbatch", {"7", {"HPCTRAIN_CHAIN_RESTART=1"}, "n2,n3"}),
            "8");
  EXPECT_EQ(calls(),
            "sbatch --parsable /runs/a/job.sbatch\n"
            "sbatch --parsable --dependency=afterany:7 --export=ALL,HPCTRAIN_CHAIN_RESTART=1 "
            "--exclude=n2,n3 /runs/a/job.sbatch\n")
      << "a chain's next job must be submitted to start once job 7 has ended "
         "(--dependency=afterany:7)";
  EXPECT_THROW(client_->submit("/runs/a/job.sbatch", {"", {"A=1,2"}, ""}), std::invalid_argument);
  answer("sbatch", "Submitted batch job 9\n");
  try {
    client_->submit("/runs/a/job.sbatch", {});
    ADD_FAILURE() << "no job id accepted";
  } catch (const SlurmUnreachable&) {
    ADD_FAILURE() << "a bad answer is not a missing controller";
  } catch (const SlurmError& e) {
    EXPECT_EQ(std::string(e.what()), "sbatch printed no job id: 'Submitted batch job 9'");
  }
}

TEST_F(CommandClientTest, RequeueRefusedSaysWhatScontrolSaid) {
  answer("scontrol", "", "Requested operation is presently disabled for job 7\n", 1);
  try {
    client_->requeue("7");
    ADD_FAILURE() << "refusal not reported";
  } catch (const SlurmUnreachable&) {
    ADD_FAILURE() << "a refusal taken for a missing controller";
  } catch (const SlurmError& e) {
    EXPECT_EQ(std::string(e.what()),
              "scontrol requeue 7 was refused (scontrol: Requested operation is presently "
              "disabled for job 7)");
  }
  answer("scontrol", "");
  EXPECT_NO_THROW(client_->requeue("7_2"));
  EXPECT_NO_THROW(client_->exclude_nodes("7", "n2,n3"));
  EXPECT_EQ(
      calls(),
      "scontrol requeue 7\nscontrol requeue 7_2\nscontrol update JobId=7 ExcNodeList=n2,n3\n");
}

// A requeue signals the job's processes, scontrol among them when it is slow to exit: the TERM
// must not cut it short (it runs with TERM ignored), so that the supervisor learns that the
// requeue was done and goes on to exclude the lost nodes. One ended by a signal all the same
// (KILL) is no refusal (the requeue may have been carried out), or the step supervisor would
// submit the next job of a chain beside the requeued job, in the same run directory.
TEST_F(CommandClientTest, RequeueOutlivesTheRequeuesTermAndAKilledOneIsNoRefusal) {
  write_text(dir_ / "bin" / "scontrol", "#!/bin/bash\nkill -TERM $$\nsleep 0.1\nexit 0\n");
  EXPECT_NO_THROW(client_->requeue("7")) << "the requeue's TERM ended scontrol before it answered";
  write_text(dir_ / "bin" / "scontrol", "#!/bin/bash\nkill -KILL $$\n");
  try {
    client_->requeue("7");
    ADD_FAILURE() << "a scontrol requeue ended by a signal taken for a requeue carried out";
  } catch (const SlurmUnreachable& e) {
    EXPECT_EQ(std::string(e.what()), "scontrol requeue 7 was ended by signal 9 before it answered");
  } catch (const SlurmError& e) {
    ADD_FAILURE() << "a scontrol requeue ended by a signal taken for a refusal: " << e.what();
  }
}

// What the step supervisor asks, each with the unreachable-controller handling the CLI's commands
// have: Slurm's words for a controller it could not contact are a SlurmUnreachable, a refusal a
// plain SlurmError.
TEST_F(CommandClientTest, EveryCommandTellsNoAnswerFromARefusal) {
  const std::vector<std::pair<std::string, std::function<void()>>> commands = {
      {"requeue", [&] { client_->requeue("7"); }},
      {"exclude_nodes", [&] { client_->exclude_nodes("7", "n2"); }},
      {"step_ids", [&] { client_->step_ids("7"); }},
      {"hostnames", [&] { client_->hostnames("n[1-2]"); }},
      {"slurmd_port", [&] { client_->slurmd_port(); }},
      {"partitions", [&] { client_->partitions(); }},
      {"query", [&] { client_->query("7"); }},
      {"query_all", [&] { client_->query_all({"7"}); }},
      {"cancel", [&] { client_->cancel("7"); }},
      {"submit", [&] { client_->submit("job.sbatch", {}); }},
      {"signal", [&] { client_->signal("7", "USR2"); }},
      {"requeue_allowed", [&] { client_->requeue_allowed("7"); }},
  };
  for (const char* program : {"scontrol", "squeue", "sinfo", "scancel", "sbatch"}) {
    answer(program, "", kUnreachable, 1);
  }
  for (const auto& [name, run] : commands) {
    EXPECT_THROW(run(), SlurmUnreachable) << name;
  }
  for (const char* program : {"scontrol", "squeue", "sinfo", "scancel", "sbatch"}) {
    answer(program, "", "error: Invalid job id specified\n", 1);
  }
  for (const auto& [name, run] : commands) {
    if (name == "query" || name == "query_all") continue;  // sacct's turn; squeue's "none known"
    try {
      run();
      ADD_FAILURE() << name << ": a refusal not reported";
    } catch (const SlurmUnreachable& e) {
      ADD_FAILURE() << name << ": a refusal taken for no answer: " << e.what();
    } catch (const SlurmError&) {
    }
  }
}

TEST_F(CommandClientTest, NoAnswerInTimeOrNoConfigurationIsUnreachable) {
  auto quick = make_command_client({5s, 1s});
  write_text(dir_ / "standin" / "squeue.sleep", "10");
  const auto start = std::chrono::steady_clock::now();
  try {
    quick->step_ids("7");
    ADD_FAILURE() << "a silent squeue answered";
  } catch (const SlurmUnreachable& e) {
    EXPECT_NE(std::string(e.what()).find("squeue did not answer within 1 s"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 8s);
  ::setenv("SLURM_CONF", dir_.file("no-such.conf").c_str(), 1);
  EXPECT_THROW(client_->hostnames("n1"), SlurmUnreachable);
  EXPECT_THROW(client_->requeue("7"), SlurmUnreachable);
  ::unsetenv("SLURM_CONF");
  EXPECT_EQ(calls(), "squeue --noheader --steps --jobs=7 --format=%i\n") << "ran without a conf";
}

TEST_F(CommandClientTest, QueriesReadTheirAnswers) {
  answer("squeue", "  7.0\n7.batch\n7.extern\n7_2.1 \n");
  EXPECT_EQ(client_->step_ids("7"), (std::vector<std::string>{"7.0", "7_2.1"}));
  answer("scontrol", "n1\nn2\n");
  EXPECT_EQ(client_->hostnames("n[1-2]"), (std::vector<std::string>{"n1", "n2"}));
  answer("scontrol", "SlurmctldPort           = 6817\nSlurmdPort              = 6818\n");
  EXPECT_EQ(client_->slurmd_port(), 6818);
  answer("scontrol", "SlurmctldPort           = 6817\n");
  EXPECT_EQ(client_->slurmd_port(), std::nullopt);
  answer("sinfo", "debug*|up|infinite|1-infinite|3|(null)\nbig|up|1:00:00|1-4|8|(null)\n");
  const auto parts = client_->partitions();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(find_partition(parts, std::nullopt)->total_nodes(), 3);
  EXPECT_EQ(find_partition(parts, std::string("big"))->total_nodes(), 8);
  EXPECT_EQ(find_partition(parts, std::string("none")), nullptr);
  answer("squeue", "7_2|RUNNING|None|n1\n");
  EXPECT_EQ(state_of(client_->query("7_2"), "7_2"), "RUNNING");
  EXPECT_EQ(calls(),
            "squeue --noheader --steps --jobs=7 --format=%i\n"
            "scontrol show hostnames n[1-2]\n"
            "scontrol show config\nscontrol show config\n"
            "sinfo --noheader --all --format=%P|%a|%l|%s|%D|%G\n"
            "squeue --noheader --array --states=all --jobs=7_2 --format=%i|%T|%r|%N|%S\n");
}

// scancel of a step is not waited for: kill_step returns at once, scancel runs on.
// The drill's: a preemption notice to the job's steps, Slurm's word on requeue, a command beside
// the job's steps on one of its nodes.
TEST_F(CommandClientTest, SignalRequeueFlagAndACommandInTheJob) {
  client_->signal("7", "USR2");
  answer("scontrol", "JobId=7 JobName=a Priority=1 Requeue=0 Restarts=0 BatchFlag=1\n");
  EXPECT_EQ(client_->requeue_allowed("7"), std::optional<bool>(false));
  answer("scontrol", "JobId=7 JobName=Requeue=1x Requeue=1 Restarts=2\n");
  EXPECT_EQ(client_->requeue_allowed("7"), std::optional<bool>(true));
  answer("scontrol", "JobId=7 JobName=Requeue=1\n");
  EXPECT_EQ(client_->requeue_allowed("7"), std::nullopt) << "a job named Requeue=1 says nothing";
  answer("scontrol", "JobId=7 JobName=a\n");
  EXPECT_EQ(client_->requeue_allowed("7"), std::nullopt);
  answer("srun", "4242\n", "", 1);
  const auto r = client_->run_in_job("7", "n2", {"bash", "-c", "kill -STOP x"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_EQ(r.out, "4242\n");
  EXPECT_EQ(
      calls(),
      "scancel --signal=USR2 7\n"
      "scontrol show job --oneliner 7\nscontrol show job --oneliner 7\n"
      "scontrol show job --oneliner 7\nscontrol show job --oneliner 7\n"
      "srun --jobid=7 --overlap --nodes=1 --ntasks=1 --nodelist=n2 --quiet bash -c kill -STOP "
      "x\n");
}

TEST_F(CommandClientTest, KillStepDoesNotWait) {
  write_text(dir_ / "standin" / "scancel.sleep", "1");
  const auto start = std::chrono::steady_clock::now();
  client_->kill_step("7.0");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  for (int i = 0; i < 100 && calls().empty(); ++i) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(calls(), "scancel --signal=KILL 7.0\n");
  ::setenv("SLURM_CONF", dir_.file("no-such.conf").c_str(), 1);
  EXPECT_NO_THROW(client_->kill_step("7.1")) << "kill_step never throws";
  ::unsetenv("SLURM_CONF");
}

TEST_F(CommandClientTest, AccountingSaysWhyItWasNotChecked) {
  answer("sacctmgr", "", "You are not running a supported accounting_storage plugin\n", 1);
  EXPECT_EQ(client_->accounting("me").not_checked,
            "sacctmgr said: You are not running a supported accounting_storage plugin");
  write_text(dir_ / "standin" / "sacctmgr.sleep", "10");
  EXPECT_EQ(make_command_client({5s, 1s})->accounting("me").not_checked,
            "sacctmgr did not answer within 1 s");
  test::fs::remove(dir_ / "standin" / "sacctmgr.sleep");
  answer("sacctmgr", "proj1|gpu|normal,high\n");
  const auto a = client_->accounting("me");
  EXPECT_EQ(a.not_checked, "");
  ASSERT_EQ(a.associations.size(), 1u);
  EXPECT_EQ(a.associations[0].qos, (std::vector<std::string>{"normal", "high"}));
}

}  // namespace
}  // namespace hpctrain::slurm
