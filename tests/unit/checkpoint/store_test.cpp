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
  ASSERT_EQ(manifest["files"].size(), 4u);  // model.bin, state.json, rng-0.bin, rng-1.bin
  EXPECT_EQ(manifest["files"]["rng-1.bin"]["rank"], 1);
  EXPECT_EQ(manifest["files"]["model.bin"]["size"],
            make_part(kSeed, 10, 0).files["model.bin"].size());
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

std::vector<Damage> damages() {
  auto edit_manifest = [](const fs::path& step_dir, const std::function<void(json&)>& edit) {
    json m = json::parse(read_bytes(step_dir / "manifest.json"));
    edit(m);
    fs::remove(step_dir / "manifest.json");
    write_bytes(step_dir / "manifest.json", m.dump());
  };
  return {
      {"truncated",
       [](const fs::path& d) {
         fs::resize_file(d / "model.bin", fs::file_size(d / "model.bin") / 2);
       },
       "bytes, the manifest says", "model.bin"},
      {"bit_flipped",
       [](const fs::path& d) {
         std::string bytes = read_bytes(d / "model.bin");
         bytes[bytes.size() / 3] ^= 0x10;
         write_bytes(d / "model.bin", bytes);
       },
       "the manifest says", "model.bin"},
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
      {"manifest_names_absent_file",
       [edit_manifest](const fs::path& d) {
         edit_manifest(d, [](json& m) {
           m["files"]["extra.bin"] = {{"rank", 1}, {"size", 3}, {"xxh3_64", "0123456789abcdef"}};
         });
       },
       "missing", "extra.bin"},
      {"manifest_of_another_step",
       [edit_manifest](const fs::path& d) { edit_manifest(d, [](json& m) { m["step"] = 7; }); },
       "names step 7", "manifest.json"},
  };
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
  const std::vector<fs::path> foreign = {dir / "notes.txt", dir / "my-analysis",
                                         dir / ".step-abc.tmp", dir / "step-000000003.replaced-1",
                                         dir / "step-12"};
  write_bytes(foreign[0], "keep me");
  for (size_t i = 1; i < foreign.size(); ++i) fs::create_directories(foreign[i]);

  EXPECT_TRUE(ranks.rank1.clean_leftovers().empty());  // rank 0's job
  EXPECT_TRUE(fs::exists(dir / ".step-000000007.tmp"));
  EXPECT_EQ(ranks.rank0.clean_leftovers(),
            (std::vector<std::string>{".step-000000007.tmp", "step-000000008"}));
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

TEST(CheckpointStore, CommitWithoutEveryPartFailsAndCommitsNothing) {
  TwoRanks ranks;
  ranks.save(1);
  ASSERT_TRUE(ranks.rank0.write_part(2, make_part(kSeed, 2, 0)));  // rank 1 never wrote
  try {
    ranks.rank0.commit(2, json::object());
    ADD_FAILURE() << "commit without rank 1's part succeeded";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(".part-1.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not committed"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ranks.rank1.load_latest(shared_files())->step, 1);
  EXPECT_THROW(ranks.rank1.commit(2, json::object()), rt::Error);  // rank 0's job
  ranks.rank0.abandon(2);
  EXPECT_FALSE(fs::exists(ranks.dir / ".step-000000002.tmp"));
  EXPECT_EQ(ranks.rank0.committed_steps(), std::vector<int64_t>{1});
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
  {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  cv.notify_all();
  const WriteResult async_result = store.wait();
  ASSERT_TRUE(async_result.ok) << async_result.error;
  EXPECT_FALSE(store.write_in_flight());
  store.commit(2, json::object());

  // The same part through the synchronous path: the same bytes and manifest entries.
  const WriteResult sync_result = store.write_part(3, make_part(kSeed, 2, 0));
  ASSERT_TRUE(sync_result.ok) << sync_result.error;
  EXPECT_EQ(sync_result.bytes, async_result.bytes);
  store.commit(3, json::object());
  const auto from_async = store.load_latest(shared_files(), 2);
  const auto from_sync = store.load_latest(shared_files(), 3);
  ASSERT_TRUE(from_async && from_sync);
  EXPECT_EQ(from_async->files, expected_files(kSeed, 2, 0));
  EXPECT_EQ(from_sync->files, from_async->files);
  const auto entries = [&](int64_t step) {
    return json::parse(mem.read_file(
        "/run/checkpoints/" + Store::step_name(step) + "/manifest.json", 1 << 20))["files"];
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
