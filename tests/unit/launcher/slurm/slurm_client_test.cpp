// The pieces of the Slurm client that need no cluster: job id validation, state parsing, the
// process runner's deadline. tests/slurm covers the real commands.
#include <gtest/gtest.h>

#include "common/process.hpp"
#include "slurm/client.hpp"

namespace hpctrain::slurm {
namespace {

using namespace std::chrono_literals;
using common::run_command;

TEST(SlurmClient, JobIdsAreValidated) {
  EXPECT_EQ(parse_job_id("123\n"), "123");
  EXPECT_EQ(parse_job_id("123;cluster1\n"), "123");
  EXPECT_EQ(parse_job_id("123_4"), "123_4");
  for (const char* bad : {"", "\n", "abc", "12 34", "123;", "123_", "_4", "1;rm -rf /",
                          "Submitted batch job 5", "123\n456", "-1", "99999999999999999999"}) {
    EXPECT_FALSE(parse_job_id(bad)) << bad;
  }
}

TEST(SlurmClient, StateLines) {
  const auto s = parse_state_lines("12_0|RUNNING|None|node1\n12_1|PENDING|Priority|\n\n", "squeue");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].job_id, "12_0");
  EXPECT_EQ(s[0].state, "RUNNING");
  EXPECT_EQ(s[0].nodes, "node1");
  EXPECT_EQ(s[1].reason, "Priority");
  const auto a = parse_state_lines("7|CANCELLED by 0|0:15|n1\n", "sacct");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].state, "CANCELLED");
  EXPECT_EQ(a[0].source, "sacct");
}

TEST(Process, CapturesOutputAndStatus) {
  const auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10s);
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(Process, ArgumentsAreNotInterpretedByAShell) {
  const auto r = run_command({"printf", "%s", "$(id); `id` | x"}, 10s);
  EXPECT_EQ(r.out, "$(id); `id` | x");
}

TEST(Process, DeadlineKillsAHangingChild) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_command({"sleep", "30"}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_status, 128 + 15);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // A child that ignores TERM still ends, by KILL.
  const auto r2 = run_command({"sh", "-c", "trap '' TERM; sleep 30"}, 300ms);
  EXPECT_TRUE(r2.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST(Process, MissingProgramIsReported) {
  const auto r = run_command({"/nonexistent/sbatch"}, 1s);
  EXPECT_TRUE(r.not_found);
  EXPECT_NE(r.err.find("/nonexistent/sbatch"), std::string::npos);
}

}  // namespace
}  // namespace hpctrain::slurm
