// The pieces of the Slurm client that need no cluster: job id validation, state parsing.
// tests/slurm covers the real commands.
#include <gtest/gtest.h>

#include <ctime>

#include "slurm/client.hpp"

namespace hpctrain::slurm {
namespace {

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
  const auto started = parse_state_lines("9|RUNNING|None|n1|2026-11-22T02:48:10\n", "squeue");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].start, "2026-11-22T02:48:10");
}

// Slurm writes its times in the local time zone, without one named.
TEST(SlurmClient, SlurmTimes) {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 10;
  tm.tm_mday = 22;
  tm.tm_hour = 2;
  tm.tm_min = 48;
  tm.tm_sec = 10;
  tm.tm_isdst = -1;
  EXPECT_EQ(parse_slurm_time("2026-11-22T02:48:10"), static_cast<double>(std::mktime(&tm)));
  for (const char* none : {"N/A", "Unknown", "None", "", "2026-11-22T02:48:10Z", "2026-11-22"}) {
    EXPECT_FALSE(parse_slurm_time(none)) << none;
  }
}

}  // namespace
}  // namespace hpctrain::slurm
