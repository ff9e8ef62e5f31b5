// Faults at every operation of a save, as leveldb's fault-injection test does: an injected error
// at each operation in turn is reported and commits nothing; a crash at each operation that
// loses everything not fsynced leaves the previous step or the new one, with the bytes saved at
// that step, and the run can save again afterwards.
#include <gtest/gtest.h>

#include <cerrno>

#include "checkpoint/store.hpp"
#include "common/error.hpp"
#include "mem_env.hpp"
#include "payload.hpp"

namespace hpctrain::checkpoint {
namespace {

using nlohmann::json;
using test::expected_files;
using test::FaultEnv;
using test::make_part;
using test::MemEnv;
using test::shared_files;

constexpr uint64_t kSeed = 7;
constexpr const char* kRunDir = "/run";
constexpr const char* kDir = "/run/checkpoints";

// A run directory in memory with `prior` steps committed (durably) by two ranks, keeping two.
struct World {
  MemEnv mem;
  FaultEnv env{mem};
  std::vector<std::string> reports;

  explicit World(const std::vector<int64_t>& prior) {
    mem.create_dir(kRunDir, 0700);
    mem.sync_dir("/");
    if (prior.empty()) return;
    Store rank0(kDir, options(), 0, 2, env), rank1(kDir, options(), 1, 2, env);
    for (const int64_t step : prior) {
      EXPECT_TRUE(rank1.write_part(step, make_part(kSeed, step, 1)));
      EXPECT_TRUE(rank0.write_part(step, make_part(kSeed, step, 0)));
      rank0.commit(step, {{"step", step}});
    }
  }

  StoreOptions options() {
    StoreOptions o;
    o.keep_last = 2;
    o.report = [this](const std::string& line) { reports.push_back(line); };
    return o;
  }

  // What a save of `step` by both ranks showed the caller: every error and report, and whether
  // it committed. The stores are made inside, so faults reach their start-up too.
  struct Outcome {
    bool committed = false;
    std::string errors;
  };
  Outcome save(int64_t step) {
    Outcome out;
    try {
      Store rank0(kDir, options(), 0, 2, env), rank1(kDir, options(), 1, 2, env);
      const WriteResult w1 = rank1.write_part(step, make_part(kSeed, step, 1));
      const WriteResult w0 = rank0.write_part(step, make_part(kSeed, step, 0));
      out.errors += w1.error + "\n" + w0.error + "\n";
      if (w0.ok && w1.ok) {
        try {
          rank0.commit(step, {{"step", step}});
          out.committed = true;
        } catch (const rt::Error& e) {
          out.errors += std::string(e.what()) + "\n";
          rank0.abandon(step);
        }
      } else {
        rank0.abandon(step);
      }
    } catch (const rt::Error& e) {  // a store could not start
      out.errors += std::string(e.what()) + "\n";
    }
    for (const auto& line : reports) out.errors += line + "\n";
    return out;
  }

  // Both ranks load, without faults; they must agree. nullopt when nothing is committed.
  std::optional<int64_t> load_both() {
    env.reset();
    Store rank0(kDir, options(), 0, 2, env), rank1(kDir, options(), 1, 2, env);
    rank0.clean_leftovers();
    const auto on0 = rank0.load_latest(shared_files());
    const auto on1 = rank1.load_latest(shared_files());
    EXPECT_EQ(on0.has_value(), on1.has_value());
    if (!on0 || !on1) return std::nullopt;
    EXPECT_EQ(on0->step, on1->step);
    EXPECT_EQ(on0->files, expected_files(kSeed, on0->step, 0)) << "step " << on0->step;
    EXPECT_EQ(on1->files, expected_files(kSeed, on1->step, 1)) << "step " << on1->step;
    EXPECT_EQ(on0->meta, json({{"step", on0->step}}));
    // Nothing of ours left over after clean_leftovers: only committed steps.
    for (const auto& name : mem.list_dir(kDir)) {
      EXPECT_TRUE(mem.stat(std::string(kDir) + "/" + name + "/manifest.json", false))
          << name << " left over";
    }
    return on0->step;
  }
};

// The operations of a save of `step` after `prior`, and the index of the commit point: the
// fsync of the step directory that makes manifest.json's rename durable.
std::pair<std::vector<std::string>, int64_t> save_operations(const std::vector<int64_t>& prior,
                                                             int64_t step) {
  World world(prior);
  world.env.reset();
  EXPECT_TRUE(world.save(step).committed);
  const auto log = world.env.log();
  const std::string step_dir = std::string(kDir) + "/" + Store::step_name(step);
  int64_t commit_point = -1;
  bool renamed = false;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i] == "rename " + step_dir + "/.manifest.json.tmp to " + step_dir + "/manifest.json") {
      renamed = true;
    } else if (renamed && log[i] == "fsync directory " + step_dir) {
      commit_point = static_cast<int64_t>(i);
      break;
    }
  }
  EXPECT_GE(commit_point, 0) << "no commit point in the save's operations";
  return {log, commit_point};
}

struct Scenario {
  const char* name;
  std::vector<int64_t> prior;  // committed before
  int64_t step;                // saved under faults
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> kScenarios = {
      // The first save of a run: the checkpoint directory is made on the way.
      {"first_save", {}, 1},
      // A save with two committed before and keep_last 2: retention removes step 1 after it.
      {"with_retention", {1, 2}, 3},
  };
  return kScenarios;
}

TEST(CheckpointFaults, EveryInjectedErrorIsReportedAndNothingHalfCommitted) {
  for (const auto& scenario : scenarios()) {
    SCOPED_TRACE(scenario.name);
    const auto [operations, commit_point] = save_operations(scenario.prior, scenario.step);
    ASSERT_GT(operations.size(), 20u);
    const std::optional<int64_t> previous =
        scenario.prior.empty() ? std::nullopt : std::optional<int64_t>(scenario.prior.back());
    for (size_t index = 0; index < operations.size(); ++index) {
      SCOPED_TRACE("operation " + std::to_string(index) + ": " + operations[index]);
      World world(scenario.prior);
      world.env.reset();
      world.env.fail_at(static_cast<int64_t>(index), index % 2 ? ENOSPC : EIO);
      const auto outcome = world.save(scenario.step);
      const std::string injected = world.env.injected();
      ASSERT_FALSE(injected.empty()) << "the fault did not fire";
      // Never swallowed: the caller sees the failing operation, its file and the OS's text.
      EXPECT_NE(outcome.errors.find(injected), std::string::npos)
          << "injected: " << injected << "\nseen:\n"
          << outcome.errors;
      const auto loaded = world.load_both();
      if (outcome.committed) {
        // Only failures after the commit point (retention) leave the step committed.
        EXPECT_GT(static_cast<int64_t>(index), commit_point);
        EXPECT_EQ(loaded, scenario.step);
      } else {
        EXPECT_EQ(loaded, previous);
      }
    }
  }
}

TEST(CheckpointFaults, CrashAtEveryOperationKeepsPreviousOrNewAndSavesAgain) {
  int64_t trials = 0;
  for (const auto& scenario : scenarios()) {
    SCOPED_TRACE(scenario.name);
    const auto [operations, commit_point] = save_operations(scenario.prior, scenario.step);
    const std::optional<int64_t> previous =
        scenario.prior.empty() ? std::nullopt : std::optional<int64_t>(scenario.prior.back());
    // One past the last operation: a crash right after a complete save loses nothing.
    for (size_t index = 0; index <= operations.size(); ++index) {
      SCOPED_TRACE("crash at operation " + std::to_string(index) +
                   (index < operations.size() ? ": " + operations[index] : ""));
      World world(scenario.prior);
      world.env.reset();
      world.env.crash_at(static_cast<int64_t>(index));
      world.save(scenario.step);
      world.mem.crash();
      const auto loaded = world.load_both();
      // Durable exactly when the crash came after the commit point.
      EXPECT_EQ(loaded, static_cast<int64_t>(index) > commit_point
                            ? std::optional<int64_t>(scenario.step)
                            : previous);
      // The run goes on from there: the next save commits and loads.
      const int64_t next = loaded.value_or(0) + 1;
      const auto again = world.save(next);
      EXPECT_TRUE(again.committed) << again.errors;
      EXPECT_EQ(world.load_both(), next);
      ++trials;
    }
  }
  std::cout << trials << " crash points checked\n";
}

}  // namespace
}  // namespace hpctrain::checkpoint
