// The run directory: atomic writes, frozen-spec protection, the ledger's node losses.
#include <gtest/gtest.h>

#include "run/run_dir.hpp"
#include "support/test_util.hpp"

namespace hpctrain::run {
namespace {

using test::read_text;
using test::TempDir;
using test::write_text;

spec::Resolved resolved_in(const TempDir& dir, const std::string& extra = {},
                           std::vector<std::string> overrides = {}) {
  write_text(dir / "spec.toml", "[job]\nname = \"t\"\nrun_dir = \"" + (dir / "run").string() +
                                    "\"\n[data]\nsynthetic = true\n" + extra);
  auto o = test::options_for(dir / "spec.toml");
  o.overrides = std::move(overrides);
  return spec::load(o);
}

TEST(RunDir, WriteFileAtomicReplacesWholeFilesAndLeavesNoTemporaries) {
  TempDir dir;
  write_file_atomic(dir / "f", "one");
  write_file_atomic(dir / "f", "two");
  EXPECT_EQ(read_text(dir / "f"), "two");
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : test::fs::directory_iterator(dir.path())) ++n;
  EXPECT_EQ(n, 1u);
  EXPECT_THROW(write_file_atomic(dir / "no/such/dir/f", "x"), RunDirError);
}

TEST(RunDir, PrepareWritesSpecScriptAndLogsDir) {
  TempDir dir;
  const auto r = resolved_in(dir);
  const auto p = prepare(r, "#!/bin/bash\n", /*force=*/false);
  EXPECT_EQ(p.script, dir / "run/job.sbatch");
  EXPECT_EQ(read_text(dir / "run/spec.toml"), spec::freeze(r.spec));
  EXPECT_EQ(read_text(p.script), "#!/bin/bash\n");
  EXPECT_TRUE(test::fs::is_directory(dir / "run/logs"));
  EXPECT_FALSE(p.spec_changed);
  // Submitting the same spec again is fine (a resubmission of the same run).
  EXPECT_NO_THROW(prepare(r, "#!/bin/bash\n", false));
}

TEST(RunDir, DifferentSpecIsRefusedWithoutForceAndKeptWithIt) {
  TempDir dir;
  const auto first = resolved_in(dir);
  prepare(first, "s1", false);
  // Submitted once: the directory now belongs to that configuration.
  records::append_submission(dir / "run", {"41", "2026-11-22T02:48:07Z", 0});
  const auto second = resolved_in(dir, "[train]\nepochs = 9\n");
  try {
    prepare(second, "s2", false);
    FAIL() << "a different spec must be refused";
  } catch (const RunDirError& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos);
  }
  EXPECT_EQ(read_text(dir / "run/spec.toml"), spec::freeze(first.spec)) << "must be untouched";
  EXPECT_EQ(read_text(dir / "run/job.sbatch"), "s1");
  const auto p = prepare(second, "s2", /*force=*/true);
  EXPECT_TRUE(p.spec_changed);
  EXPECT_EQ(read_text(dir / "run/spec.toml"), spec::freeze(second.spec));
  EXPECT_EQ(read_text(dir / "run/spec.toml.replaced-1"), spec::freeze(first.spec));
}

TEST(RunDir, ArrayTasksGetTheirOwnDirectoriesAndSpecs) {
  TempDir dir;
  const auto r = resolved_in(dir, "[sweep.params]\n\"train.seed\" = [1, 2, 3]\n");
  const auto p = prepare(r, "s", false);
  EXPECT_EQ(p.array_tasks, 3u);
  for (int i = 0; i < 3; ++i) {
    const auto task = dir / ("run/task-00" + std::to_string(i));
    const std::string frozen = read_text(task / "spec.toml");
    EXPECT_NE(frozen.find("seed = " + std::to_string(i + 1) + "\n"), std::string::npos) << frozen;
    EXPECT_NE(frozen.find("run_dir = \"" + task.string() + "\""), std::string::npos) << frozen;
  }
}

TEST(RunDir, AttemptsLedgerWithNodeLosses) {
  TempDir dir;
  // An old line (no step or node-loss fields), a node lost and replaced, a node lost and the world
  // shrunk, the step that completed, then a loss that fell back to a requeue in a later job.
  write_text(
      dir / "attempts.jsonl",
      R"({"job_id":"12","restart":0,"nodes":"n[1-3]","exit_status":75,"reason":"requeued","last_step":20})"
      "\n"
      R"({"job_id":"12","restart":1,"exit_status":76,"reason":"node_lost","step":0,"world_size":6,"lost_nodes":"n2","added_nodes":"n4","detected":"2026-11-23T23:41:08.412Z","detected_by":"slurmd on n2 refused the connection","stop_s":1.3,"recover_s":22.8})"
      "\n"
      R"({"job_id":"12","restart":1,"exit_status":76,"reason":"node_lost","step":1,"world_size":6,"lost_nodes":"n3","added_nodes":"","stop_s":2,"recover_s":null})"
      "\n"
      R"({"job_id":"12","restart":1,"exit_status":0,"reason":"completed","step":2,"world_size":4})"
      "\n"
      R"({"job_id":"14","restart":0,"exit_status":76,"reason":"node_lost_requeued","step":0,"world_size":4,"lost_nodes":"n1","added_nodes":"","stop_s":0.5,"recover_s":null})"
      "\n");
  size_t malformed = 0;
  const auto a = records::read_attempts(dir.path(), &malformed);
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(malformed, 0u);
  EXPECT_EQ(a[0].srun_step, 0);
  EXPECT_FALSE(a[0].world_size);
  EXPECT_FALSE(records::is_node_loss(a[0].reason));
  EXPECT_EQ(a[1].srun_step, 0);
  EXPECT_EQ(a[1].world_size, 6);
  EXPECT_EQ(a[1].lost_nodes, "n2");
  EXPECT_EQ(a[1].added_nodes, "n4");
  EXPECT_EQ(a[1].detected, "2026-11-23T23:41:08.412Z");
  EXPECT_EQ(a[1].detected_by, "slurmd on n2 refused the connection");
  EXPECT_EQ(a[1].stop_s, 1.3);
  EXPECT_EQ(a[1].recover_s, 22.8);
  EXPECT_EQ(a[2].srun_step, 1);
  EXPECT_EQ(a[2].stop_s, 2.0);
  EXPECT_FALSE(a[2].recover_s);
  EXPECT_EQ(a[3].srun_step, 2);
  EXPECT_TRUE(records::is_node_loss(a[4].reason));
  // Lines per srun step, attempts per (job_id, restart): 12/0, 12/1, 14/0.
  EXPECT_EQ(records::count_job_attempts(a), 3u);

  const auto losses = node_losses(a);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(losses[0].line, 1u);
  EXPECT_EQ(losses[0].outcome, "replaced");
  EXPECT_TRUE(losses[0].recovered);
  EXPECT_TRUE(losses[0].next_step_ended);
  EXPECT_EQ(losses[0].next_world_size, 6);
  EXPECT_EQ(losses[1].outcome, "shrank");
  EXPECT_EQ(losses[1].next_world_size, 4);
  EXPECT_FALSE(losses[1].recovered);  // no recover_s: training never went on in the allocation
  EXPECT_EQ(losses[2].outcome, "requeued");
  EXPECT_FALSE(losses[2].recovered);
  EXPECT_FALSE(losses[2].next_step_ended);  // job 14's next line is not there yet
}

// A loss past the limit where Slurm refused the requeue: the next job of a chain took over.
TEST(RunDir, ANodeLossThatFellBackToAChain) {
  TempDir dir;
  write_text(
      dir / "attempts.jsonl",
      R"({"job_id":"14","restart":0,"exit_status":76,"reason":"node_lost_chained","step":0,"world_size":4,"lost_nodes":"n1","added_nodes":"","stop_s":0.5,"excluded":"n1"})"
      "\n"
      R"({"job_id":"15","restart":1,"exit_status":0,"reason":"completed","step":0,"world_size":4})"
      "\n");
  const auto a = records::read_attempts(dir.path());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].reason, records::Reason::kNodeLostChained);
  EXPECT_EQ(a[0].excluded, "n1");
  const auto losses = node_losses(a);
  ASSERT_EQ(losses.size(), 1u);
  EXPECT_EQ(losses[0].outcome, "chained") << "a loss that fell back to a chain called requeued";
  EXPECT_FALSE(losses[0].recovered);
  EXPECT_FALSE(losses[0].next_step_ended) << "job 15 is the next job, not the next step";
}

TEST(RunDir, LastCommittedStepNeedsTheManifest) {
  TempDir dir;
  EXPECT_FALSE(last_committed_step(dir.path()));
  write_text(dir / "checkpoints/step-000000100/manifest.json", "{}");
  write_text(dir / "checkpoints/step-000000200/manifest.json", "{}");
  write_text(dir / "checkpoints/step-000000300/model.bin", "partial");  // not committed
  write_text(dir / "checkpoints/.tmp-step-000000400/manifest.json", "{}");
  EXPECT_EQ(last_committed_step(dir.path()), 200);
}

}  // namespace
}  // namespace hpctrain::run
