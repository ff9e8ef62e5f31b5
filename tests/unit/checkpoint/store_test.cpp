// The checkpoint store on the real filesystem: round trip, damaged checkpoints and fallback,
// leftovers, retention, the asynchronous path and the options from the spec.
#include "checkpoint/store.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "mem_env.hpp"
#include "payload.hpp"
#include "spec/spec.hpp"
#include "support/temp_dir.hpp"
#include "support/test_util.hpp"

namespace hpctrain::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expected_files;
using test::make_part;
using test::shared_files;

constexpr uint64_t kSeed = 42;

StoreOptions keep(int64_t last, std::vector<std::string>* reports = nullptr, int64_t every = 0) {
  StoreOptions o;
  o.keep_last = last;
  o.keep_every = every;
  if (reports) o.report = [reports](const std::string& line) { reports->push_back(line); };
  return o;
}

// Two ranks in one process over TMP/checkpoints in a fresh temporary directory; what the store
// reports is kept.
struct TwoRanks {
  explicit TwoRanks(int64_t keep_last = 3, int64_t keep_every = 0)
      : dir(tmp / "checkpoints"),
        rank0(dir.string(), keep(keep_last, &reports, keep_every), 0, 2),
        rank1(dir.string(), keep(keep_last, &reports, keep_every), 1, 2) {}

  // Both ranks write their part of `step` (rank 1 on a thread, as another process would, at
  // the same time), then rank 0 commits.
  void save(int64_t step, const json& meta = json::object()) {
    WriteResult r1;
    std::thread other([&] { r1 = rank1.write_part(step, make_part(kSeed, step, 1)); });
    const WriteResult r0 = rank0.write_part(step, make_part(kSeed, step, 0));
    other.join();
    ASSERT_TRUE(r0.ok) << r0.error;
    ASSERT_TRUE(r1.ok) << r1.error;
    // Every rank its own node: each merges its own part.
    const WriteResult m1 = rank1.merge_node(step), m0 = rank0.merge_node(step);
    ASSERT_TRUE(m0.ok) << m0.error;
    ASSERT_TRUE(m1.ok) << m1.error;
    rank0.commit(step, meta);
  }

  hpctrain::test::TempDir tmp;
  fs::path dir;
  std::vector<std::string> reports;
  Store rank0, rank1;
};

std::string read_bytes(const fs::path& path) { return hpctrain::test::read_text(path); }

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

bool contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const auto& line : lines) all += line + "\n";
  return all;
}

// A format 3 node manifest's own XXH3: of its compact JSON without the field.
std::string self_hash(json node) {
  node.erase("self_xxh3_64");
  return xxh3_64_hex(node.dump());
}

TEST(CheckpointStore, TwoRanksRoundTripEveryFileBitForBitWithMeta) {
  TwoRanks ranks;
  const json meta = {{"epoch", 3}, {"consumed_samples", 123456789012LL}, {"spec_hash", "ab12"}};
  ranks.save(10, meta);

  for (Store* store : {&ranks.rank0, &ranks.rank1}) {
    const auto loaded = store->load_latest(shared_files());
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->step, 10);
    EXPECT_EQ(loaded->world_size, 2);
    EXPECT_EQ(loaded->meta, meta);
    const int rank = store == &ranks.rank0 ? 0 : 1;
    EXPECT_EQ(loaded->files, expected_files(kSeed, 10, rank)) << "rank " << rank;
  }
  // The layout docs/checkpoint-format.md describes: the committed directory with its manifest,
  // no temporary directory left.
  const fs::path step_dir = ranks.dir / "step-000000010";
  EXPECT_FALSE(fs::exists(ranks.dir / ".step-000000010.tmp"));
  const json manifest = json::parse(read_bytes(step_dir / "manifest.json"));
  EXPECT_EQ(manifest["format"], "hpctrain-checkpoint");
  EXPECT_EQ(manifest["format_version"], kFormatVersion);
  EXPECT_EQ(manifest["step"], 10);
  EXPECT_EQ(manifest["world_size"], 2);
  EXPECT_EQ(manifest["hash"], "xxh3_64");
  EXPECT_EQ(manifest["meta"], meta);
  // Format 3: the node count and layout (every rank its own node here: one run of two nodes
  // of one rank from rank 0), no entry per node or per file.
  EXPECT_FALSE(manifest.contains("files"));
  EXPECT_EQ(manifest["nodes"], 2);
  EXPECT_EQ(manifest["layout"], json::parse(R"({"runs": [[0, 1, 2]]})"));
  const std::string node1 = read_bytes(step_dir / ".node-1.json");
  EXPECT_EQ(json::parse(node1)["self_xxh3_64"], self_hash(json::parse(node1)));
  EXPECT_EQ(json::parse(node1)["ranks"], json::parse("[1]"));
  const json node0 = json::parse(read_bytes(step_dir / ".node-0.json"));
  EXPECT_EQ(node0["ranks"], json::parse("[0]"));
  ASSERT_EQ(node0["files"].size(), 3u);
  EXPECT_EQ(node0["files"]["rng-0.bin"]["rank"], 0);
  EXPECT_EQ(node0["files"]["model.bin"]["size"], make_part(kSeed, 10, 0).files["model.bin"].size());
  EXPECT_EQ(json::parse(node1)["files"]["rng-1.bin"]["rank"], 1);
  EXPECT_EQ(ranks.rank0.committed_steps(), std::vector<int64_t>{10});
}

TEST(CheckpointStore, NewestByStepNumberNotByTime) {
  TwoRanks ranks;
  ranks.save(20);
  ranks.save(10);  // committed later, but an older step: kept, and not the one loaded
  EXPECT_EQ(ranks.rank0.committed_steps(), (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->step, 20);
  EXPECT_EQ(ranks.rank1.load_latest(shared_files(), /*at_most=*/19)->step, 10);
  EXPECT_FALSE(ranks.rank1.load_latest(shared_files(), /*at_most=*/9));
}

// Each way a checkpoint can be damaged, applied to the newest of two: reported with the reason
// and the file, and the previous good one is loaded.
struct Damage {
  const char* name;
  std::function<void(const fs::path& step_dir)> apply;
  const char* reason;  // in the report
  const char* file;    // in the report
};

void edit_manifest(const fs::path& step_dir, const std::function<void(json&)>& edit) {
  json m = json::parse(read_bytes(step_dir / "manifest.json"));
  edit(m);
  fs::remove(step_dir / "manifest.json");
  write_bytes(step_dir / "manifest.json", m.dump());
}

// Rewrites node manifest `node` with its own XXH3 made anew (`rehash`), so that only what the
// edit changed is wrong, or left as it was (the edit is then damage the hash finds).
void edit_node(const fs::path& step_dir, int node, const std::function<void(json&)>& edit,
               bool rehash = true) {
  const fs::path path = step_dir / (".node-" + std::to_string(node) + ".json");
  json n = json::parse(read_bytes(path));
  ASSERT_EQ(n["self_xxh3_64"], self_hash(n)) << "as written";
  edit(n);
  if (rehash) n["self_xxh3_64"] = self_hash(n);
  fs::remove(path);
  write_bytes(path, n.dump(2));  // laid out otherwise: the hash is of the content
}

// Damage to the node manifests, through which rank 1 reads every file.
std::vector<Damage> node_damages() {
  return {
      {"node_manifest_names_absent_file",
       [](const fs::path& d) {
         edit_node(d, 1, [](json& n) {
           n["files"]["extra.bin"] = {{"rank", 1}, {"size", 3}, {"xxh3_64", "0123456789abcdef"}};
         });
       },
       "missing", "extra.bin"},
      {"node_manifest_missing", [](const fs::path& d) { fs::remove(d / ".node-0.json"); },
       "is missing", ".node-0.json"},
      {"node_manifest_truncated",
       [](const fs::path& d) {
         fs::resize_file(d / ".node-1.json", fs::file_size(d / ".node-1.json") - 5);
       },
       "not valid JSON", ".node-1.json"},
      {"node_manifest_changed",  // still valid JSON, one size other: only its own hash tells
       [](const fs::path& d) {
         edit_node(
             d, 0, [](json& n) { n["files"]["model.bin"]["size"] = 1; }, /*rehash=*/false);
       },
       "(changed since it was written)", ".node-0.json"},
      {"node_manifest_without_its_hash",
       [](const fs::path& d) {
         edit_node(
             d, 1, [](json& n) { n.erase("self_xxh3_64"); }, /*rehash=*/false);
       },
       "has no \"self_xxh3_64\"", ".node-1.json"},
      {"node_manifest_of_other_ranks",
       [](const fs::path& d) { edit_node(d, 1, [](json& n) { n["ranks"] = {0}; }); },
       "manifest.json's layout [1]", ".node-1.json"},
      {"node_manifest_of_another_step",
       [](const fs::path& d) { edit_node(d, 1, [](json& n) { n["step"] = 7; }); }, "names step 7",
       ".node-1.json"},
      {"node_manifest_of_another_node",
       [](const fs::path& d) { edit_node(d, 1, [](json& n) { n["node"] = 0; }); },
       "written for node 0", ".node-1.json"},
  };
}

std::vector<Damage> damages() {
  std::vector<Damage> all = {
      {"truncated",
       [](const fs::path& d) {
         fs::resize_file(d / "model.bin", fs::file_size(d / "model.bin") / 2);
       },
       "bytes, node manifest .node-0.json says", "model.bin"},
      {"bit_flipped",
       [](const fs::path& d) {
         std::string bytes = read_bytes(d / "model.bin");
         bytes[bytes.size() / 3] ^= 0x10;
         write_bytes(d / "model.bin", bytes);
       },
       "node manifest .node-0.json says", "model.bin"},
      {"file_missing", [](const fs::path& d) { fs::remove(d / "rng-1.bin"); }, "missing",
       "rng-1.bin"},
      {"manifest_missing", [](const fs::path& d) { fs::remove(d / "manifest.json"); },
       "No such file", "manifest.json"},
      {"manifest_garbled",
       [](const fs::path& d) {
         std::string text = read_bytes(d / "manifest.json");
         text.resize(text.size() / 2);
         write_bytes(d / "manifest.json", text);
       },
       "not valid JSON", "manifest.json"},
      {"manifest_world_size_absurd",  // a garbled number must not size an allocation
       [](const fs::path& d) {
         edit_manifest(d, [](json& m) { m["world_size"] = int64_t{1} << 40; });
       },
       "is beyond any run's", "manifest.json"},
      {"manifest_of_another_step",
       [](const fs::path& d) { edit_manifest(d, [](json& m) { m["step"] = 7; }); }, "names step 7",
       "manifest.json"},
      {"manifest_layout_beyond_the_world",
       [](const fs::path& d) {
         edit_manifest(d, [](json& m) { m["layout"] = {{"runs", {{0, 1, 3}}}}; });
       },
       "is not [first rank, ranks per node, nodes]", "manifest.json"},
      {"manifest_layout_one_node_short",
       [](const fs::path& d) {
         edit_manifest(d, [](json& m) { m["layout"] = {{"runs", {{0, 1, 1}}}}; });
       },
       "the layout has 1 nodes, \"nodes\" says 2", "manifest.json"},
  };
  for (auto& damage : node_damages()) all.push_back(std::move(damage));
  return all;
}

TEST(CheckpointStore, DamagedNewestIsReportedAndThePreviousLoaded) {
  for (const auto& damage : damages()) {
    SCOPED_TRACE(damage.name);
    TwoRanks ranks;
    ranks.save(1);
    ranks.save(2);
    const fs::path newest = ranks.dir / "step-000000002";
    damage.apply(newest);

    // Rank 1 reads every kind of file damaged here (its own and the shared ones).
    const auto loaded = ranks.rank1.load_latest(shared_files());
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->step, 1);
    EXPECT_EQ(loaded->files, expected_files(kSeed, 1, 1));
    const auto& reports = ranks.reports;
    ASSERT_EQ(reports.size(), 1u) << joined(reports);
    EXPECT_NE(reports[0].find(newest.string()), std::string::npos) << reports[0];
    EXPECT_NE(reports[0].find(damage.reason), std::string::npos) << reports[0];
    EXPECT_NE(reports[0].find(damage.file), std::string::npos) << reports[0];

    // Nothing good at all: absence, not an error.
    damage.apply(ranks.dir / "step-000000001");
    ranks.reports.clear();
    EXPECT_FALSE(ranks.rank1.load_latest(shared_files()));
    EXPECT_EQ(reports.size(), 2u) << joined(reports);
  }
}

TEST(CheckpointStore, RanksThatDisagreeAgreeOnTheMinimumWithAtMost) {
  TwoRanks ranks;
  ranks.save(1);
  ranks.save(2);
  fs::remove(ranks.dir / "step-000000002" / "rng-1.bin");  // only rank 1 reads it
  const auto on0 = ranks.rank0.load_latest(shared_files());
  const auto on1 = ranks.rank1.load_latest(shared_files());
  ASSERT_TRUE(on0 && on1);
  EXPECT_EQ(on0->step, 2);
  EXPECT_EQ(on1->step, 1);
  // The caller's agreement: the minimum, loaded again where it differs.
  const auto again = ranks.rank0.load_latest(shared_files(), std::min(on0->step, on1->step));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->step, 1);
  EXPECT_EQ(again->files, expected_files(kSeed, 1, 0));
}

TEST(CheckpointStore, CleanLeftoversRemovesOursOnly) {
  TwoRanks ranks;
  const fs::path& dir = ranks.dir;
  ranks.save(5);
  // An interrupted save (temporary directory with a file), one renamed but never committed,
  // and things that are not ours.
  fs::create_directories(dir / ".step-000000007.tmp");
  write_bytes(dir / ".step-000000007.tmp" / "model.bin", "half");
  fs::create_directories(dir / "step-000000008");
  write_bytes(dir / "step-000000008" / "model.bin", "whole");
  // A step retention retired whose removal a stop cut short.
  fs::create_directories(dir / ".step-000000004.retired-1");
  write_bytes(dir / ".step-000000004.retired-1" / "model.bin", "old");
  const std::vector<fs::path> foreign = {dir / "notes.txt",
                                         dir / "my-analysis",
                                         dir / ".step-abc.tmp",
                                         dir / ".step-abc.retired-1",
                                         dir / ".step-000000004.retired-x",
                                         dir / "step-000000003.replaced-1",
                                         dir / "step-12"};
  write_bytes(foreign[0], "keep me");
  for (size_t i = 1; i < foreign.size(); ++i) fs::create_directories(foreign[i]);

  EXPECT_TRUE(ranks.rank1.clean_leftovers().empty());  // rank 0's job
  EXPECT_TRUE(fs::exists(dir / ".step-000000007.tmp"));
  EXPECT_EQ(ranks.rank0.clean_leftovers(),
            (std::vector<std::string>{".step-000000004.retired-1", ".step-000000007.tmp",
                                      "step-000000008"}));
  EXPECT_FALSE(fs::exists(dir / ".step-000000004.retired-1"));
  EXPECT_FALSE(fs::exists(dir / ".step-000000007.tmp"));
  EXPECT_FALSE(fs::exists(dir / "step-000000008"));
  for (const auto& path : foreign) EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_EQ(read_bytes(foreign[0]), "keep me");
  EXPECT_EQ(ranks.rank0.load_latest(shared_files())->step, 5);
  EXPECT_TRUE(ranks.rank0.clean_leftovers().empty());
}

TEST(CheckpointStore, RetentionKeepsTheLastAndEveryMth) {
  TwoRanks last2(/*keep_last=*/2);
  for (int64_t step = 1; step <= 5; ++step) {
    last2.save(step);
    // The newest always survives its own commit; older ones go only once a newer one exists.
    const auto steps = last2.rank0.committed_steps();
    EXPECT_EQ(steps.back(), step);
    EXPECT_EQ(steps.size(), static_cast<size_t>(std::min<int64_t>(step, 2)));
  }
  EXPECT_EQ(last2.rank0.committed_steps(), (std::vector<int64_t>{4, 5}));
  EXPECT_FALSE(fs::exists(last2.dir / "step-000000003"));

  TwoRanks every3(/*keep_last=*/2, /*keep_every=*/3);
  for (int64_t step = 1; step <= 7; ++step) every3.save(step);
  EXPECT_EQ(every3.rank0.committed_steps(), (std::vector<int64_t>{3, 6, 7}));

  // An older step committed after newer ones deletes nothing newer, even keeping one.
  TwoRanks last1(/*keep_last=*/1);
  last1.save(30);
  last1.save(20);
  last1.save(10);
  EXPECT_EQ(last1.rank0.committed_steps(), (std::vector<int64_t>{10, 20, 30}));
  last1.save(40);
  EXPECT_EQ(last1.rank0.committed_steps(), std::vector<int64_t>{40});
}

// Retention un-commits and renames the old step at once; its files go on rank 0's retirer thread
// while the commit has returned (at 10k ranks they are 20k files, which every rank would wait
// for: bench/scale). A failed removal is reported and left to clean_leftovers().
TEST(CheckpointStore, RetentionRemovesFilesOffTheCommitPath) {
  hpctrain::test::TempDir tmp;
  const fs::path dir = tmp / "checkpoints";
  test::FaultEnv env(default_env());
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int removals = 0;
  env.set_hook([&](const std::string& what) {
    if (what.rfind("remove all ", 0) != 0 || what.find(".retired-") == std::string::npos) return;
    std::unique_lock<std::mutex> lock(mu);
    ++removals;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  });
  std::vector<std::string> reports;
  auto rank0 = std::make_unique<Store>(dir.string(), keep(1, &reports), 0, 2, env);
  Store rank1(dir.string(), keep(1, &reports), 1, 2, env);
  const auto save = [&](int64_t step) {
    for (Store* s : {&rank1, rank0.get()}) {
      ASSERT_TRUE(s->write_part(step, make_part(kSeed, step, s->rank())).ok);
    }
    for (Store* s : {&rank1, rank0.get()}) ASSERT_TRUE(s->merge_node(step).ok);
    rank0->commit(step, json::object());
  };
  save(1);
  save(2);  // returns with step 1's removal held at the gate
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return removals > 0; }));
  }
  EXPECT_FALSE(fs::exists(dir / "step-000000001"));
  ASSERT_TRUE(fs::exists(dir / ".step-000000001.retired-1"));
  EXPECT_FALSE(fs::exists(dir / ".step-000000001.retired-1" / "manifest.json"));
  EXPECT_TRUE(fs::exists(dir / "step-000000002" / "manifest.json"));
  {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  cv.notify_all();
  rank0->wait_retired();
  EXPECT_FALSE(fs::exists(dir / ".step-000000001.retired-1"));
  EXPECT_EQ(rank0->load_latest(shared_files())->step, 2);

  // A removal that fails is reported, and the next start's clean_leftovers() finishes it.
  env.set_hook([](const std::string& what) {
    if (what.rfind("remove all ", 0) == 0 && what.find(".retired-") != std::string::npos) {
      HPCTRAIN_THROW(rt::Error, what + ": Input/output error");
    }
  });
  save(3);
  rank0->wait_retired();
  EXPECT_TRUE(contains(reports, "retention could not remove")) << joined(reports);
  EXPECT_TRUE(fs::exists(dir / ".step-000000002.retired-1"));
  env.set_hook({});
  rank0 = std::make_unique<Store>(dir.string(), keep(1, &reports), 0, 2, env);
  EXPECT_EQ(rank0->clean_leftovers(), std::vector<std::string>{".step-000000002.retired-1"});
  EXPECT_EQ(rank0->committed_steps(), std::vector<int64_t>{3});
}

TEST(CheckpointStore, ExistingStepIsMovedAsideNeverOverwritten) {
  TwoRanks ranks;
  const fs::path& dir = ranks.dir;
  ranks.save(4);
  // Damaged, passed over at load, and the run reaches step 4 again.
  write_bytes(dir / "step-000000004" / "rng-0.bin", "garbage");
  ranks.save(4, {{"second", true}});
  EXPECT_TRUE(contains(ranks.reports, "step-000000004.replaced-1")) << joined(ranks.reports);
  EXPECT_EQ(read_bytes(dir / "step-000000004.replaced-1" / "rng-0.bin"), "garbage");
  const auto loaded = ranks.rank0.load_latest(shared_files());
  ASSERT_TRUE(loaded);
  EXPECT_EQ(loaded->meta, json({{"second", true}}));
  EXPECT_EQ(loaded->files, expected_files(kSeed, 4, 0));
}

// A merge that fails names the part behind it. Rank 0's own node's manifest is the one the
// commit checks: without it nothing is committed.
TEST(CheckpointStore, CommitWithoutRankZerosNodeFailsAndCommitsNothing) {
  TwoRanks ranks;
  ranks.save(1);
  ASSERT_TRUE(ranks.rank1.write_part(2, make_part(kSeed, 2, 1)));  // rank 0 never wrote
  ASSERT_TRUE(ranks.rank1.merge_node(2));
  const WriteResult merged = ranks.rank0.merge_node(2);
  EXPECT_FALSE(merged.ok);
  EXPECT_NE(merged.error.find(".part-0.json"), std::string::npos) << merged.error;
  EXPECT_NE(merged.error.find("rank 0"), std::string::npos) << merged.error;
  try {
    ranks.rank0.commit(2, json::object());
    ADD_FAILURE() << "commit without rank 0's part succeeded";
  } catch (const rt::Error& e) {
    // The node manifest missing, its node, and the part behind it.
    EXPECT_NE(std::string(e.what()).find(".node-0.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("part manifests missing: .part-0.json"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("not committed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->step, 1);
  EXPECT_THROW(ranks.rank1.commit(2, json::object()), rt::Error);  // rank 0's job
  ranks.rank0.abandon(2);
  EXPECT_FALSE(fs::exists(ranks.dir / ".step-000000002.tmp"));
  EXPECT_EQ(ranks.rank0.committed_steps(), std::vector<int64_t>{1});
}

// The other nodes' merges are the caller's vote (train/checkpoint_commit.cpp never commits
// when one failed). A commit that went ahead anyway is never loaded where it counts: the
// rank whose node manifest is missing passes it over, naming it, and the ranks' agreement on
// the minimum lands on the previous step.
TEST(CheckpointStore, AStepWithoutEveryNodeManifestIsNeverAgreedOn) {
  TwoRanks ranks;
  ranks.save(1);
  ASSERT_TRUE(ranks.rank0.write_part(2, make_part(kSeed, 2, 0)));  // rank 1 never wrote
  ASSERT_TRUE(ranks.rank0.merge_node(2));
  const WriteResult merged = ranks.rank1.merge_node(2);
  EXPECT_FALSE(merged.ok);
  EXPECT_NE(merged.error.find(".part-1.json"), std::string::npos) << merged.error;
  ranks.rank0.commit(2, json::object());  // against the protocol
  const auto on0 = ranks.rank0.load_latest(shared_files());
  const auto on1 = ranks.rank1.load_latest(shared_files());
  ASSERT_TRUE(on0 && on1);
  EXPECT_EQ(on1->step, 1);
  EXPECT_TRUE(contains(ranks.reports, ".node-1.json is missing")) << joined(ranks.reports);
  const int64_t agreed = std::min(on0->step, on1->step);
  EXPECT_EQ(ranks.rank0.load_latest(shared_files(), agreed)->step, 1);
}

TEST(CheckpointStore, BadFileNamesAreRefused) {
  hpctrain::test::TempDir tmp;
  Store store(tmp.file("checkpoints"), keep(2), 0, 1);
  for (const std::string name : {"../escape", "manifest.json", ".hidden", "a/b", ""}) {
    Part part;
    part.files[name] = "x";
    const WriteResult result = store.write_part(1, part);
    EXPECT_FALSE(result.ok) << name;
    EXPECT_NE(result.error.find("bad file name \"" + name + "\""), std::string::npos)
        << result.error;
  }
  EXPECT_FALSE(fs::exists(tmp / "escape"));
}

TEST(CheckpointStore, AsyncWriteEqualsSyncAndAllowsOneInFlight) {
  test::MemEnv mem;
  mem.create_dir("/run", 0700);
  test::FaultEnv env(mem);
  // A gate in front of every file creation holds the background write until the test opens it.
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  env.set_hook([&](const std::string& what) {
    if (what.rfind("create /", 0) != 0) return;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return open; });
  });
  Store store("/run/checkpoints", keep(3), 0, 1, env);

  EXPECT_THROW(store.poll(), rt::Error);  // nothing started
  EXPECT_THROW(store.wait(), rt::Error);
  store.start_write(2, make_part(kSeed, 2, 0));
  EXPECT_TRUE(store.write_in_flight());
  EXPECT_FALSE(store.poll());  // held at the gate
  EXPECT_THROW(store.start_write(3, make_part(kSeed, 3, 0)), rt::Error);
  EXPECT_THROW(store.commit(2, json::object()), rt::Error);
  const WriteResult early_merge = store.merge_node(2);
  EXPECT_FALSE(early_merge.ok);
  EXPECT_NE(early_merge.error.find("in flight"), std::string::npos) << early_merge.error;
  {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  cv.notify_all();
  const WriteResult async_result = store.wait();
  ASSERT_TRUE(async_result.ok) << async_result.error;
  EXPECT_FALSE(store.write_in_flight());
  ASSERT_TRUE(store.merge_node(2));
  store.commit(2, json::object());

  // The same part through the synchronous path: the same bytes and manifest entries.
  const WriteResult sync_result = store.write_part(3, make_part(kSeed, 2, 0));
  ASSERT_TRUE(sync_result.ok) << sync_result.error;
  EXPECT_EQ(sync_result.bytes, async_result.bytes);
  ASSERT_TRUE(store.merge_node(3));
  store.commit(3, json::object());
  const auto from_async = store.load_latest(shared_files(), 2);
  const auto from_sync = store.load_latest(shared_files(), 3);
  ASSERT_TRUE(from_async && from_sync);
  EXPECT_EQ(from_async->files, expected_files(kSeed, 2, 0));
  EXPECT_EQ(from_sync->files, from_async->files);
  const auto entries = [&](int64_t step) {
    return json::parse(mem.read_file("/run/checkpoints/" + Store::step_name(step) + "/.node-0.json",
                                     1 << 20))["files"];
  };
  EXPECT_EQ(entries(2), entries(3));

  // poll() hands a finished result over once; then another write may start.
  store.start_write(4, make_part(kSeed, 4, 0));
  std::optional<WriteResult> polled;
  while (!(polled = store.poll())) std::this_thread::yield();
  EXPECT_TRUE(polled->ok) << polled->error;
  EXPECT_THROW(store.poll(), rt::Error);
  store.start_write(5, make_part(kSeed, 5, 0));
  store.abandon(5);  // waits for it and discards it
  EXPECT_FALSE(store.write_in_flight());
  EXPECT_FALSE(mem.stat("/run/checkpoints/.step-000000005.tmp", false));
}

TEST(CheckpointStore, NodeLayoutNumbersNodesByTheirLowestRank) {
  const NodeLayout layout({7, 3, 7, 9, 3, 7});  // labels are anything; ranks need not be contiguous
  EXPECT_EQ(layout.world_size(), 6);
  ASSERT_EQ(layout.nodes(), 3);
  EXPECT_EQ(layout.ranks_of(0), (std::vector<int>{0, 2, 5}));
  EXPECT_EQ(layout.ranks_of(1), (std::vector<int>{1, 4}));
  EXPECT_EQ(layout.ranks_of(2), (std::vector<int>{3}));
  EXPECT_EQ(layout.node_of(4), 1);
  EXPECT_EQ(layout.leader(1), 1);
  const auto hosts = NodeLayout::from_hosts({"n2", "n1", "n2", "n1"});
  EXPECT_EQ(hosts->ranks_of(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(hosts->ranks_of(1), (std::vector<int>{1, 3}));
  EXPECT_EQ(NodeLayout::one_per_rank(3)->nodes(), 3);
  EXPECT_THROW(NodeLayout(std::vector<int>{}), rt::Error);
  hpctrain::test::TempDir tmp;
  const Store follower(tmp.file("checkpoints"), keep(2), 4,
                       std::make_shared<const NodeLayout>(layout));
  EXPECT_FALSE(follower.node_leader());
  EXPECT_EQ(follower.layout().nodes(), 3);
}

// Ranks as threads of one process, one Store each over one shared layout, as the many-rank
// emulator runs them: each phase on every rank at once, then the next.
struct ManyRanks {
  ManyRanks(const std::vector<std::string>& hosts, Env& env, const std::string& dir)
      : layout(NodeLayout::from_hosts(hosts)) {
    for (int r = 0; r < layout->world_size(); ++r) {
      stores.push_back(std::make_unique<Store>(dir, keep(3, &reports), r, layout, env));
    }
  }
  std::vector<WriteResult> on_every_rank(const std::function<WriteResult(Store&)>& phase) {
    std::vector<WriteResult> results(stores.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < stores.size(); ++r) {
      threads.emplace_back([&, r] { results[r] = phase(*stores[r]); });
    }
    for (auto& t : threads) t.join();
    return results;
  }
  void save(int64_t step) {
    for (const auto& w : on_every_rank([step](Store& s) {
           return s.write_part(step, make_part(kSeed, step, s.rank(), /*max_bytes=*/256));
         })) {
      ASSERT_TRUE(w.ok) << w.error;
    }
    for (const auto& m : on_every_rank([step](Store& s) { return s.merge_node(step); })) {
      ASSERT_TRUE(m.ok) << m.error;
    }
    stores[0]->commit(step, {{"step", step}});
  }

  std::shared_ptr<const NodeLayout> layout;
  std::vector<std::string> reports;
  std::vector<std::unique_ptr<Store>> stores;
};

TEST(CheckpointStore, NonContiguousNodesRoundTripWithOneManifestPerNode) {
  hpctrain::test::TempDir tmp;
  const fs::path dir = tmp / "checkpoints";
  ManyRanks ranks({"a", "b", "a", "c", "b", "a"}, default_env(), dir.string());
  ranks.save(3);
  for (const auto& store : ranks.stores) {
    const auto loaded = store->load_latest(shared_files());
    ASSERT_TRUE(loaded) << "rank " << store->rank();
    EXPECT_EQ(loaded->step, 3);
    EXPECT_EQ(loaded->world_size, 6);
    EXPECT_EQ(loaded->format_version, kFormatVersion);
    EXPECT_EQ(loaded->files, expected_files(kSeed, 3, store->rank(), 256)) << store->rank();
  }
  const fs::path step_dir = dir / "step-000000003";
  const json manifest = json::parse(read_bytes(step_dir / "manifest.json"));
  // Nodes not contiguous: the layout lists each node's rank ranges.
  EXPECT_EQ(manifest["nodes"], 3);
  EXPECT_EQ(manifest["layout"],
            json::parse(R"({"ranks": [[[0, 0], [2, 2], [5, 5]], [[1, 1], [4, 4]], [[3, 3]]]})"));
  const json node1 = json::parse(read_bytes(step_dir / ".node-1.json"));
  EXPECT_EQ(node1["ranks"], json::parse("[1, 4]"));
  EXPECT_EQ(node1["files"].size(), 2u);
  EXPECT_EQ(node1["files"]["rng-4.bin"]["rank"], 4);
  // Only leaders wrote a node manifest.
  EXPECT_FALSE(fs::exists(step_dir / ".node-3.json"));
  EXPECT_TRUE(ranks.reports.empty()) << joined(ranks.reports);

  // A damaged node manifest fails the ranks that need it: rank 4's own node; ranks of other
  // nodes read node 0's manifest (the shared files) and their own, and still load step 3.
  ranks.save(4);
  fs::remove(dir / "step-000000004" / ".node-1.json");
  write_bytes(dir / "step-000000004" / ".node-1.json", "{}");
  EXPECT_EQ(ranks.stores[4]->load_latest(shared_files())->step, 3);
  EXPECT_TRUE(contains(ranks.reports, ".node-1.json: \"format_version\" missing"))
      << joined(ranks.reports);
  EXPECT_EQ(ranks.stores[3]->load_latest(shared_files())->step, 4);
  EXPECT_EQ(ranks.stores[2]->load_latest(shared_files())->step, 4);
}

// The commit's cost does not grow with the nodes: rank 0 reads its own node's manifest (and
// retention the committed manifests), never one per node or per rank.
TEST(CheckpointStore, CommitReadsItsOwnNodeManifestNotOnePerNode) {
  test::MemEnv mem;
  mem.create_dir("/run", 0700);
  test::FaultEnv env(mem);  // its log is for one thread: the ranks take turns here
  std::vector<std::string> hosts;
  for (int r = 0; r < 32; ++r) hosts.push_back("node" + std::to_string(r / 8));
  const auto layout = NodeLayout::from_hosts(hosts);
  std::vector<std::unique_ptr<Store>> stores;
  for (int r = 0; r < 32; ++r) {
    stores.push_back(std::make_unique<Store>("/run/checkpoints", keep(2), r, layout, env));
  }
  for (auto& s : stores) ASSERT_TRUE(s->write_part(1, make_part(kSeed, 1, s->rank(), 64)));
  env.reset();
  for (auto& s : stores) ASSERT_TRUE(s->merge_node(1));
  size_t part_reads = 0;
  for (const auto& line : env.log()) part_reads += line.find("/.part-") != std::string::npos;
  EXPECT_EQ(part_reads, 32u);  // each by its node's leader
  env.reset();
  stores[0]->commit(1, json::object());
  size_t reads = 0, stats = 0;
  for (const auto& line : env.log()) {
    reads += line.rfind("read ", 0) == 0;
    stats += line.rfind("stat ", 0) == 0 && line.find(".part-") != std::string::npos;
  }
  EXPECT_EQ(reads, 1u + 1u) << "node 0's manifest and retention's manifest.json";
  EXPECT_EQ(stats, 0u);
  const json manifest =
      json::parse(mem.read_file("/run/checkpoints/step-000000001/manifest.json", 1 << 20));
  EXPECT_EQ(manifest["nodes"], 4);
  EXPECT_EQ(manifest["layout"], json::parse(R"({"runs": [[0, 8, 4]]})"));
  for (auto& s : stores) {
    EXPECT_EQ(s->load_latest(shared_files())->files, expected_files(kSeed, 1, s->rank(), 64));
  }
}

TEST(CheckpointStore, HundredsOfRanksAsThreadsSaveAndLoad) {
  hpctrain::test::TempDir tmp;
  std::vector<std::string> hosts;
  for (int r = 0; r < 256; ++r) hosts.push_back("n" + std::to_string(r % 16));  // round robin
  ManyRanks ranks(hosts, default_env(), tmp.file("checkpoints"));
  ranks.save(9);
  const auto loaded = ranks.on_every_rank([](Store& s) {
    WriteResult same;
    const auto l = s.load_latest(shared_files());
    same.ok = l && l->step == 9 && l->files == expected_files(kSeed, 9, s.rank(), 256);
    return same;
  });
  for (size_t r = 0; r < loaded.size(); ++r) EXPECT_TRUE(loaded[r].ok) << "rank " << r;
  const json manifest =
      json::parse(read_bytes(tmp / "checkpoints" / "step-000000009" / "manifest.json"));
  EXPECT_EQ(manifest["nodes"], 16);
  EXPECT_EQ(manifest["layout"]["ranks"][1].size(), 16u);  // ranks 1, 17, 33, ...
}

// A format 1 checkpoint, written as the store wrote it before node manifests (manifest.json
// lists every file of every rank): still loaded, listed and retired by retention.
void write_format1(const fs::path& dir, int64_t step, int world_size, const json& meta) {
  const fs::path step_dir = dir / Store::step_name(step);
  fs::create_directories(step_dir);
  fs::permissions(step_dir, fs::perms::owner_all, fs::perm_options::replace);
  json files = json::object();
  for (int r = 0; r < world_size; ++r) {
    json part_files = json::object();
    for (const auto& [name, bytes] : make_part(kSeed, step, r).files) {
      write_bytes(step_dir / name, bytes);
      part_files[name] = {{"size", bytes.size()}, {"xxh3_64", xxh3_64_hex(bytes)}};
      files[name] = {{"rank", r}, {"size", bytes.size()}, {"xxh3_64", xxh3_64_hex(bytes)}};
    }
    const json part = {{"format_version", 1},
                       {"step", step},
                       {"rank", r},
                       {"world_size", world_size},
                       {"files", part_files}};
    write_bytes(step_dir / (".part-" + std::to_string(r) + ".json"), part.dump());
  }
  const json manifest = {{"format", "hpctrain-checkpoint"},
                         {"format_version", 1},
                         {"step", step},
                         {"world_size", world_size},
                         {"hash", "xxh3_64"},
                         {"committed_at", "2026-11-23T09:06:01Z"},
                         {"files", files},
                         {"meta", meta}};
  write_bytes(step_dir / "manifest.json", manifest.dump(2) + "\n");
}

TEST(CheckpointStore, Format1CheckpointsStillLoad) {
  TwoRanks ranks(/*keep_last=*/2);
  fs::create_directories(ranks.dir);
  write_format1(ranks.dir, 5, 2, {{"old", true}});
  write_format1(ranks.dir, 6, 2, {{"old", true}});
  EXPECT_EQ(ranks.rank0.committed_steps(), (std::vector<int64_t>{5, 6}));
  for (Store* store : {&ranks.rank0, &ranks.rank1}) {
    const int rank = store == &ranks.rank0 ? 0 : 1;
    const auto loaded = store->load_latest(shared_files());
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->step, 6);
    EXPECT_EQ(loaded->format_version, 1);
    EXPECT_EQ(loaded->world_size, 2);
    EXPECT_EQ(loaded->meta, json({{"old", true}}));
    EXPECT_EQ(loaded->files, expected_files(kSeed, 6, rank)) << "rank " << rank;
  }
  // Damage is found through the format 1 manifest too; the older format 1 step is loaded.
  fs::resize_file(ranks.dir / "step-000000006" / "rng-1.bin", 1);
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->step, 5);
  EXPECT_TRUE(contains(ranks.reports, "bytes, the manifest says")) << joined(ranks.reports);
  // A resumed run saves this build's format next to them; retention judges both alike.
  ranks.save(7);
  ranks.save(8);
  EXPECT_EQ(ranks.rank0.committed_steps(), (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->format_version, kFormatVersion);
  // A format this build does not know is passed over, not misread.
  write_format1(ranks.dir, 9, 2, json::object());
  const fs::path m9 = ranks.dir / "step-000000009" / "manifest.json";
  json future = json::parse(read_bytes(m9));
  future["format_version"] = kFormatVersion + 1;
  fs::remove(m9);
  write_bytes(m9, future.dump());
  ranks.reports.clear();
  EXPECT_EQ(ranks.rank0.load_latest(shared_files())->step, 8);
  EXPECT_TRUE(contains(ranks.reports, "format version 4, this build reads 1 to 3"))
      << joined(ranks.reports);
}

// A format 2 checkpoint, written as the store wrote it before format 3 (manifest.json lists
// every node manifest with its size and XXH3; node manifests without their own): every rank its
// own node.
void write_format2(const fs::path& dir, int64_t step, int world_size, const json& meta) {
  const fs::path step_dir = dir / Store::step_name(step);
  fs::create_directories(step_dir);
  fs::permissions(step_dir, fs::perms::owner_all, fs::perm_options::replace);
  json nodes = json::array();
  for (int r = 0; r < world_size; ++r) {
    json files = json::object();
    int64_t bytes_total = 0;
    for (const auto& [name, bytes] : make_part(kSeed, step, r).files) {
      write_bytes(step_dir / name, bytes);
      files[name] = {{"rank", r}, {"size", bytes.size()}, {"xxh3_64", xxh3_64_hex(bytes)}};
      bytes_total += static_cast<int64_t>(bytes.size());
    }
    const std::string node = json{{"format_version", 2},      {"step", step}, {"node", r},
                                  {"world_size", world_size}, {"ranks", {r}}, {"files", files}}
                                 .dump();
    const std::string name = ".node-" + std::to_string(r) + ".json";
    write_bytes(step_dir / name, node);
    nodes.push_back({{"name", name},
                     {"ranks", {{r, r}}},
                     {"size", node.size()},
                     {"xxh3_64", xxh3_64_hex(node)},
                     {"file_count", files.size()},
                     {"bytes", bytes_total}});
  }
  const json manifest = {{"format", "hpctrain-checkpoint"},
                         {"format_version", 2},
                         {"step", step},
                         {"world_size", world_size},
                         {"hash", "xxh3_64"},
                         {"committed_at", "2026-11-27T09:06:01Z"},
                         {"nodes", nodes},
                         {"meta", meta}};
  write_bytes(step_dir / "manifest.json", manifest.dump(2) + "\n");
}

// Checkpoints written before format 3 load (a run resumes across the upgrade), their damage is
// found through manifest.json's hashes, and retention retires them like any other.
TEST(CheckpointStore, Format2CheckpointsStillLoad) {
  TwoRanks ranks(/*keep_last=*/2);
  fs::create_directories(ranks.dir);
  write_format2(ranks.dir, 5, 2, {{"old", 2}});
  write_format2(ranks.dir, 6, 2, {{"old", 2}});
  EXPECT_EQ(ranks.rank0.committed_steps(), (std::vector<int64_t>{5, 6}));
  for (Store* store : {&ranks.rank0, &ranks.rank1}) {
    const auto loaded = store->load_latest(shared_files());
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->step, 6);
    EXPECT_EQ(loaded->format_version, 2);
    EXPECT_EQ(loaded->meta, json({{"old", 2}}));
    EXPECT_EQ(loaded->files, expected_files(kSeed, 6, store->rank())) << "rank " << store->rank();
  }
  // One byte of node 1's manifest changed, the size kept: manifest.json's hash finds it.
  std::string node1 = read_bytes(ranks.dir / "step-000000006" / ".node-1.json");
  node1[node1.find("\"rank\":1") + 7] = '0';
  fs::remove(ranks.dir / "step-000000006" / ".node-1.json");
  write_bytes(ranks.dir / "step-000000006" / ".node-1.json", node1);
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->step, 5);
  EXPECT_TRUE(contains(ranks.reports, ".node-1.json has XXH3")) << joined(ranks.reports);
  ranks.save(7);
  ranks.save(8);
  ranks.rank0.wait_retired();
  EXPECT_EQ(ranks.rank0.committed_steps(), (std::vector<int64_t>{7, 8}));
  EXPECT_FALSE(fs::exists(ranks.dir / "step-000000006"));
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->format_version, kFormatVersion);
}

TEST(CheckpointStore, OptionsComeFromTheSpec) {
  hpctrain::test::TempDir tmp;
  const auto resolved = spec::load(hpctrain::test::spec_in(
      tmp, hpctrain::test::minimal_spec(
               "[checkpoint]\nkeep_last = 4\nkeep_every = 1000\nlustre_stripe_count = -1\n"
               "lustre_stripe_size_mib = 16\n")));
  const StoreOptions o = store_options_from_spec(resolved.spec);
  EXPECT_EQ(o.keep_last, 4);
  EXPECT_EQ(o.keep_every, 1000);
  EXPECT_EQ(o.lustre_stripe_count, -1);
  EXPECT_EQ(o.lustre_stripe_size, int64_t{16} << 20);
  EXPECT_NO_THROW(o.validate());
  // The defaults: keep 3, nothing kept for good, the filesystem's striping.
  const StoreOptions d = store_options_from_spec(
      spec::load(hpctrain::test::spec_in(tmp, hpctrain::test::minimal_spec())).spec);
  EXPECT_EQ(d.keep_last, 3);
  EXPECT_EQ(d.keep_every, 0);
  EXPECT_EQ(d.lustre_stripe_count, 0);
  EXPECT_EQ(d.lustre_stripe_size, 0);

  StoreOptions bad = o;
  bad.keep_last = 0;
  try {
    bad.validate();
    ADD_FAILURE() << "keep_last 0 accepted";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("keep_last"), std::string::npos) << e.what();
  }
  bad = o;
  bad.lustre_stripe_size = 1000;
  EXPECT_THROW(bad.validate(), rt::Error);
}

}  // namespace
}  // namespace hpctrain::checkpoint
