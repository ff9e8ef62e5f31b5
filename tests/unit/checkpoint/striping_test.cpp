// Lustre striping: the decision (filesystem type x configured values -> stripe or not, and the
// argv) and what the store does with it elsewhere.
#include "checkpoint/striping.hpp"

#include <gtest/gtest.h>

#include "checkpoint/store.hpp"
#include "mem_env.hpp"

namespace hpctrain::checkpoint {
namespace {

using Argv = std::vector<std::string>;
constexpr int64_t kExt4 = 0xEF53, kNfs = 0x6969, kMiB = int64_t{1} << 20;

TEST(CheckpointStriping, DecisionByFilesystemAndSettings) {
  struct Case {
    int64_t fs_type, count, size;
    bool stripe;
    Argv argv;
  };
  const std::string d = "/lustre/p/run/checkpoints";
  const std::vector<Case> cases = {
      // Nothing configured: never, wherever.
      {kLustreSuperMagic, 0, 0, false, {}},
      {kExt4, 0, 0, false, {}},
      // Configured, but not on Lustre: a no-op.
      {kExt4, 4, 0, false, {}},
      {kNfs, -1, 16 * kMiB, false, {}},
      // On Lustre: only what is set is passed.
      {kLustreSuperMagic, 4, 0, true, {"lfs", "setstripe", "-c", "4", d}},
      {kLustreSuperMagic, -1, 0, true, {"lfs", "setstripe", "-c", "-1", d}},
      {kLustreSuperMagic, 0, 16 * kMiB, true, {"lfs", "setstripe", "-S", "16777216", d}},
      {kLustreSuperMagic, 8, 4 * kMiB, true, {"lfs", "setstripe", "-c", "8", "-S", "4194304", d}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::to_string(c.fs_type) + " " + std::to_string(c.count) + " " +
                 std::to_string(c.size));
    const StripePlan plan = plan_striping(c.fs_type, c.count, c.size, d);
    EXPECT_EQ(plan.stripe, c.stripe);
    EXPECT_EQ(plan.argv, c.argv);
    EXPECT_FALSE(plan.reason.empty());
  }
  // A relative directory that would read as an option.
  EXPECT_EQ(plan_striping(kLustreSuperMagic, 2, 0, "-ckpt").argv.back(), "./-ckpt");
}

TEST(CheckpointStriping, StoreStripesOnlyOnLustreAndReportsFailures) {
  test::MemEnv mem;
  mem.create_dir("/run", 0700);
  std::vector<std::string> reports;
  StoreOptions o;
  o.keep_last = 2;
  o.lustre_stripe_count = 2;
  o.report = [&](const std::string& line) { reports.push_back(line); };

  // Not Lustre: nothing runs, nothing to report.
  Store rank0("/run/checkpoints", o, 0, 2, mem);
  StripePlan plan = rank0.apply_striping();
  EXPECT_FALSE(plan.stripe);
  EXPECT_NE(plan.reason.find("not on Lustre"), std::string::npos) << plan.reason;
  EXPECT_TRUE(reports.empty());

  // Lustre, but /run/checkpoints exists only in memory, so lfs (where it is installed at all)
  // fails: reported with the command, and the store goes on.
  mem.set_fs_type(kLustreSuperMagic);
  plan = rank0.apply_striping();
  EXPECT_FALSE(plan.stripe);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_NE(reports[0].find("lfs setstripe -c 2 /run/checkpoints"), std::string::npos)
      << reports[0];
  EXPECT_NE(reports[0].find("default layout"), std::string::npos) << reports[0];

  // Rank 1 leaves it to rank 0.
  Store rank1("/run/checkpoints", o, 1, 2, mem);
  EXPECT_FALSE(rank1.apply_striping().stripe);
  EXPECT_EQ(reports.size(), 1u);
}

}  // namespace
}  // namespace hpctrain::checkpoint
