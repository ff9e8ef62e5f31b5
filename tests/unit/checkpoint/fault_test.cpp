// Faults at every operation of a save, as leveldb's fault-injection test does: an injected error
// at each operation in turn is reported and commits nothing; a crash at each operation that
// loses everything not fsynced leaves the previous step or the new one, with the bytes saved at
// that step, and the run can save again afterwards. Run with every rank its own node and with
// three ranks on two nodes (a node of two, not contiguous), so the node leaders' merges are
// among the operations; and a node manifest damaged before the commit commits nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

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

// Which ranks share a node: labels by rank (NodeLayout).
using Labels = std::vector<int>;
const Labels kTwoRanks = {0, 1};     // every rank its own node (the default layout)
const Labels kTwoNodes = {5, 9, 5};  // ranks 0 and 2 on one node, rank 1 on another

// A run directory in memory with `prior` steps committed (durably) by the ranks of `labels`,
// keeping two.
struct World {
  MemEnv mem;
  FaultEnv env{mem};
  std::vector<std::string> reports;
  std::shared_ptr<const NodeLayout> layout;

  explicit World(const std::vector<int64_t>& prior, const Labels& labels = kTwoRanks)
      : layout(std::make_shared<const NodeLayout>(labels)) {
    mem.create_dir(kRunDir, 0700);
    mem.sync_dir("/");
    if (prior.empty()) return;
    const auto stores = make_stores();
    for (const int64_t step : prior) {
      for (auto it = stores.rbegin(); it != stores.rend(); ++it) {
        EXPECT_TRUE((*it)->write_part(step, make_part(kSeed, step, (*it)->rank())));
      }
      for (auto it = stores.rbegin(); it != stores.rend(); ++it) {
        EXPECT_TRUE((*it)->merge_node(step));
      }
      stores[0]->commit(step, {{"step", step}});
    }
  }

  // One store per rank; rank 0's first.
  std::vector<std::unique_ptr<Store>> make_stores() {
    std::vector<std::unique_ptr<Store>> stores;
    for (int r = 0; r < layout->world_size(); ++r) {
      stores.push_back(std::make_unique<Store>(kDir, options(), r, layout, env));
    }
    return stores;
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
  // `before_commit` runs between the merges and the commit (to damage a node manifest).
  Outcome save(int64_t step, const std::function<void()>& before_commit = {}) {
    Outcome out;
    try {
      const auto stores = make_stores();
      Store& rank0 = *stores[0];
      // The trainer's protocol (train/checkpoint_commit.cpp): all write; if all wrote, all
      // merge; if all merged, rank 0 commits; else it abandons.
      bool all_ok = true;
      for (auto it = stores.rbegin(); it != stores.rend(); ++it) {
        const WriteResult w = (*it)->write_part(step, make_part(kSeed, step, (*it)->rank()));
        out.errors += w.error + "\n";
        all_ok = all_ok && w.ok;
      }
      if (all_ok) {
        for (auto it = stores.rbegin(); it != stores.rend(); ++it) {
          const WriteResult m = (*it)->merge_node(step);
          out.errors += m.error + "\n";
          all_ok = all_ok && m.ok;
        }
      }
      if (all_ok) {
        if (before_commit) before_commit();
        try {
          rank0.commit(step, {{"step", step}});
          out.committed = true;
          rank0.wait_retired();  // retention's removal, off the commit's path, in the log too
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

  // Every rank loads, without faults, and they agree as the trainer's restore does
  // (train/checkpointing.cpp): on the lowest step any rank found, loaded again where it differs.
  // nullopt when nothing is committed that every rank can read.
  std::optional<int64_t> load_both() {
    env.reset();
    const auto stores = make_stores();
    stores[0]->clean_leftovers();
    int64_t at_most = std::numeric_limits<int64_t>::max();
    std::vector<std::optional<Loaded>> on(stores.size());
    for (;;) {
      int64_t lowest = at_most, highest = -1;
      for (size_t r = 0; r < stores.size(); ++r) {
        on[r] = stores[r]->load_latest(shared_files(), at_most);
        lowest = std::min(lowest, on[r] ? on[r]->step : -1);
        highest = std::max(highest, on[r] ? on[r]->step : -1);
      }
      if (lowest < 0) return std::nullopt;
      if (lowest == highest) break;
      at_most = lowest;
    }
    const auto& on0 = on[0];
    for (const auto& store : stores) {
      const auto& mine = on[static_cast<size_t>(store->rank())];
      EXPECT_EQ(mine->files, expected_files(kSeed, mine->step, store->rank()))
          << "rank " << store->rank() << " step " << mine->step;
    }
    if (!on0) return std::nullopt;
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
                                                             int64_t step, const Labels& labels) {
  World world(prior, labels);
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
  Labels labels = kTwoRanks;   // the node layout
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> kScenarios = {
      // The first save of a run: the checkpoint directory is made on the way.
      {"first_save", {}, 1},
      // A save with two committed before and keep_last 2: retention removes step 1 after it.
      {"with_retention", {1, 2}, 3},
      // Three ranks on two nodes: rank 0 merges ranks 0 and 2, rank 1 its own.
      {"two_nodes", {1, 2}, 3, kTwoNodes},
  };
  return kScenarios;
}

TEST(CheckpointFaults, EveryInjectedErrorIsReportedAndNothingHalfCommitted) {
  for (const auto& scenario : scenarios()) {
    SCOPED_TRACE(scenario.name);
    const auto [operations, commit_point] =
        save_operations(scenario.prior, scenario.step, scenario.labels);
    ASSERT_GT(operations.size(), 20u);
    const std::optional<int64_t> previous =
        scenario.prior.empty() ? std::nullopt : std::optional<int64_t>(scenario.prior.back());
    for (size_t index = 0; index < operations.size(); ++index) {
      SCOPED_TRACE("operation " + std::to_string(index) + ": " + operations[index]);
      World world(scenario.prior, scenario.labels);
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
    const auto [operations, commit_point] =
        save_operations(scenario.prior, scenario.step, scenario.labels);
    const std::optional<int64_t> previous =
        scenario.prior.empty() ? std::nullopt : std::optional<int64_t>(scenario.prior.back());
    // One past the last operation: a crash right after a complete save loses nothing.
    for (size_t index = 0; index <= operations.size(); ++index) {
      SCOPED_TRACE("crash at operation " + std::to_string(index) +
                   (index < operations.size() ? ": " + operations[index] : ""));
      World world(scenario.prior, scenario.labels);
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

// A node manifest of another node than rank 0's that is not what its leader's merge wrote when
// rank 0 commits: the commit does not read it (its cost would grow with the nodes), so the step
// commits; the rank that needs it passes the step over at load, naming it and why, the ranks
// agree on the previous step, and the next save commits.
TEST(CheckpointFaults, NodeManifestDamagedAfterItsMergeIsFoundAtLoad) {
  const std::string node1 = std::string(kDir) + "/.step-000000003.tmp/.node-1.json";
  struct Case {
    const char* name;
    std::function<void(MemEnv&)> damage;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"missing", [&](MemEnv& m) { m.remove_file(node1); }, "is missing"},
      {"truncated",
       [&](MemEnv& m) {
         const std::string text = m.read_file(node1, 1 << 20);
         m.overwrite(node1, text.substr(0, text.size() / 2));
       },
       "not valid JSON"},
      {"garbled", [&](MemEnv& m) { m.overwrite(node1, "[1, 2, 3]"); }, "not a JSON object"},
      {"of_another_step",
       [&](MemEnv& m) {
         json n = json::parse(m.read_file(node1, 1 << 20));
         n["step"] = 2;
         m.overwrite(node1, n.dump());
       },
       "names step 2"},
      {"of_another_node",
       [&](MemEnv& m) {
         json n = json::parse(m.read_file(node1, 1 << 20));
         n["node"] = 0;
         m.overwrite(node1, n.dump());
       },
       "(changed since it was written)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    World world({1, 2}, kTwoNodes);
    const auto outcome = world.save(3, [&] { c.damage(world.mem); });
    EXPECT_TRUE(outcome.committed) << outcome.errors;
    world.reports.clear();
    EXPECT_EQ(world.load_both(), 2);
    const std::string seen = [&] {
      std::string all;
      for (const auto& line : world.reports) all += line + "\n";
      return all;
    }();
    EXPECT_NE(seen.find("step-000000003/.node-1.json"), std::string::npos) << seen;
    EXPECT_NE(seen.find(c.reason), std::string::npos) << seen;
    EXPECT_TRUE(world.save(4).committed);
    EXPECT_EQ(world.load_both(), 4);
  }
}

// Rank 0's own node's manifest damaged before the commit: the commit reads that one, names it
// and commits nothing; the previous step stays the newest.
TEST(CheckpointFaults, RankZerosNodeManifestDamagedBeforeTheCommitCommitsNothing) {
  const std::string node0 = std::string(kDir) + "/.step-000000003.tmp/.node-0.json";
  World world({1, 2}, kTwoNodes);
  const auto outcome = world.save(3, [&] {
    json n = json::parse(world.mem.read_file(node0, 1 << 20));
    n["files"].erase("rng-2.bin");
    world.mem.overwrite(node0, n.dump());
  });
  EXPECT_FALSE(outcome.committed);
  EXPECT_NE(outcome.errors.find(".node-0.json"), std::string::npos) << outcome.errors;
  EXPECT_NE(outcome.errors.find("changed since it was written"), std::string::npos)
      << outcome.errors;
  EXPECT_NE(outcome.errors.find("node 0: ranks 0, 2, merged by rank 0"), std::string::npos)
      << outcome.errors;
  EXPECT_EQ(world.load_both(), 2);
  EXPECT_TRUE(world.save(3).committed);
  EXPECT_EQ(world.load_both(), 3);
}

// A node leader whose merge fails: the ranks agree nothing is committed, and its error names
// the rank whose part is bad.
TEST(CheckpointFaults, ALeaderThatCannotMergeCommitsNothing) {
  World world({1}, kTwoNodes);
  const auto stores = world.make_stores();
  for (const auto& s : stores) ASSERT_TRUE(s->write_part(2, make_part(kSeed, 2, s->rank())));
  // Rank 2's part manifest, merged by rank 0 (its node's leader), lost.
  world.mem.remove_file(std::string(kDir) + "/.step-000000002.tmp/.part-2.json");
  EXPECT_TRUE(stores[1]->merge_node(2));
  EXPECT_TRUE(stores[2]->merge_node(2)) << "not a leader: nothing to do";
  const WriteResult m0 = stores[0]->merge_node(2);
  EXPECT_FALSE(m0.ok);
  EXPECT_NE(m0.error.find(".part-2.json"), std::string::npos) << m0.error;
  EXPECT_NE(m0.error.find("merging node 0"), std::string::npos) << m0.error;
  try {  // a commit anyway (the protocol forbids it) fails the same way
    stores[0]->commit(2, json::object());
    ADD_FAILURE() << "committed without node 0's manifest";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("part manifests missing: .part-2.json"), std::string::npos)
        << e.what();
  }
  stores[0]->abandon(2);
  EXPECT_EQ(world.load_both(), 1);
}

}  // namespace
}  // namespace hpctrain::checkpoint
