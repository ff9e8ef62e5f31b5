// What status, list, logs and a failed submit read or change in a run directory: the loss trend,
// run discovery and summaries, the log's attempts and ranks, a dry run's spec replaced by a
// changed submit, the cleanup after a failed sbatch, and how Slurm's "no controller" errors are
// recognised.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/exit_codes.hpp"
#include "common/time.hpp"
#include "run/cancel.hpp"
#include "run/listing.hpp"
#include "run/logs.hpp"
#include "run/run_dir.hpp"
#include "run/snapshot.hpp"
#include "run/status.hpp"
#include "run/trend.hpp"
#include "slurm/client.hpp"
#include "support/test_util.hpp"
#include "unit/launcher/slurm/fake_slurm.hpp"

namespace hpctrain::run {
namespace {

using test::read_text;
using test::TempDir;
using test::write_text;

using records::MetricsRecord;

MetricsRecord train_at(int64_t step, double loss) {
  records::TrainRecord r;
  r.step = step;
  r.loss = loss;
  return r;
}

MetricsRecord train_without_loss(int64_t step) {
  records::TrainRecord r;
  r.step = step;
  return r;
}

TEST(LossTrend, NoTrainLinesNoTrend) {
  records::EvalRecord eval;
  eval.step = 10;
  eval.loss = 1;
  EXPECT_FALSE(loss_trend({}));
  EXPECT_FALSE(loss_trend({eval}));
}

TEST(LossTrend, ResamplesIntoBucketsOfEqualLength) {
  // 100 steps, loss falling from 100 to 1: ten buckets of ten points each.
  std::vector<MetricsRecord> records;
  for (int i = 0; i < 100; ++i) records.push_back(train_at(10 * (i + 1), 100.0 - i));
  const auto t = loss_trend(records, 10);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->first_step, 10);
  EXPECT_EQ(t->last_step, 1000);
  EXPECT_EQ(t->first_loss, 100.0);
  EXPECT_EQ(t->last_loss, 1.0);
  EXPECT_EQ(t->points, 100u);
  ASSERT_EQ(t->buckets.size(), 10u);
  EXPECT_DOUBLE_EQ(*t->buckets[0], 95.5);  // mean of 100..91
  EXPECT_DOUBLE_EQ(*t->buckets[9], 5.5);   // mean of 10..1
  // Levels round((mean - 5.5) / 90 * 7): 7 6 5 5 4 3 2 2 1 0.
  EXPECT_EQ(t->sparkline, "█▇▆▆▅▄▃▃▂▁");
  // Seven points into three buckets: 2, 2 and 3 points, every point counted once.
  std::vector<MetricsRecord> seven;
  for (int i = 0; i < 7; ++i) seven.push_back(train_at(i, i));
  const auto s = loss_trend(seven, 3);
  ASSERT_EQ(s->buckets.size(), 3u);
  EXPECT_DOUBLE_EQ(*s->buckets[0], 0.5);
  EXPECT_DOUBLE_EQ(*s->buckets[1], 2.5);
  EXPECT_DOUBLE_EQ(*s->buckets[2], 5.0);
  // Fewer points than buckets: one bucket each.
  const auto few = loss_trend({train_at(1, 3), train_at(2, 1)}, 10);
  EXPECT_EQ(few->buckets.size(), 2u);
  EXPECT_EQ(few->sparkline, "█▁");
}

TEST(LossTrend, OnePointAndAFlatLine) {
  const auto one = loss_trend({train_at(20, 2.5)});
  ASSERT_TRUE(one);
  EXPECT_EQ(one->points, 1u);
  EXPECT_EQ(one->first_step, 20);
  EXPECT_EQ(one->last_step, 20);
  EXPECT_EQ(one->sparkline, "▄");
  std::vector<MetricsRecord> flat;
  for (int i = 1; i <= 30; ++i) flat.push_back(train_at(i, 0.7));
  const auto f = loss_trend(flat);
  EXPECT_EQ(f->sparkline, "▄▄▄▄▄▄▄▄▄▄");
}

TEST(LossTrend, AResumedRunCountsEachStepOnceTheLastWritten) {
  // Steps 1..6, then a resume from step 3 writes 4..6 again with other losses.
  std::vector<MetricsRecord> r;
  for (int s = 1; s <= 6; ++s) r.push_back(train_at(s, 10));
  for (int s = 4; s <= 6; ++s) r.push_back(train_at(s, 1));
  const auto t = loss_trend(r, 10);
  EXPECT_EQ(t->points, 6u);
  EXPECT_EQ(t->last_loss, 1.0);
  EXPECT_EQ(t->sparkline, "███▁▁▁");
}

TEST(LossTrend, NonFiniteLossesAreCountedAndShown) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // The worker writes a NaN or infinite loss as null, which reads back as NaN; records built
  // elsewhere may carry any value.
  const auto t = loss_trend({train_at(1, 4), train_at(2, nan), train_without_loss(3),
                             train_at(4, inf), train_at(5, 2), train_at(6, -inf)},
                            6);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->points, 6u);
  EXPECT_EQ(t->non_finite, 4u);
  EXPECT_EQ(t->first_loss, 4.0);
  EXPECT_FALSE(t->last_loss);
  EXPECT_EQ(t->sparkline, "█!!!▁!");
  // A bucket with some finite losses averages those.
  const auto mixed =
      loss_trend({train_at(1, 4), train_at(2, nan), train_at(3, 2), train_at(4, 2)}, 2);
  EXPECT_EQ(mixed->buckets[0], 4.0);
  EXPECT_EQ(mixed->buckets[1], 2.0);
  // Nothing finite at all.
  const auto none = loss_trend({train_at(1, nan)});
  EXPECT_EQ(none->sparkline, "!");
  EXPECT_FALSE(none->first_loss);
}

TEST(LossTrend, ReadsTheMetricsFileWithNullLosses) {
  TempDir dir;
  write_text(dir / "metrics.jsonl",
             "{\"kind\":\"train\",\"step\":10,\"loss\":2.0}\n"
             "{\"kind\":\"eval\",\"step\":10,\"loss\":9.0,\"top1\":0.5}\n"
             "{\"kind\":\"train\",\"step\":20,\"loss\":null}\n"
             "{\"kind\":\"train\",\"step\":40,\"loss\":1.0}\n");
  const auto t = loss_trend(records::read_metrics(dir.path()).records);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->points, 3u);
  EXPECT_EQ(t->non_finite, 1u);
  EXPECT_EQ(t->sparkline, "█!▁");
}

// A run directory as submit leaves it: spec.toml and job.sbatch.
void make_run(const fs::path& dir, const std::string& spec = "[job]\nnodes = 1\n") {
  fs::create_directories(dir);
  write_text(dir / "spec.toml", spec);
  write_text(dir / "job.sbatch", "#!/bin/bash\n");
}

TEST(ListRuns, FindsRunDirectoriesAndDoesNotDescendIntoThem) {
  TempDir root;
  make_run(root / "a");
  make_run(root / "group/b");
  make_run(root / "group/deeper/c");
  // Inside a run: a folder that looks like a run (a checkpoint, a copied run) is not listed.
  make_run(root / "a/checkpoints/step-000000010");
  // Not runs: spec.toml alone (an array task, a spec file), job.sbatch alone, an empty folder.
  fs::create_directories(root / "empty");
  write_text(root / "group/only-spec/spec.toml", "");
  write_text(root / "only-script/job.sbatch", "");
  const auto found = find_run_dirs(root.path());
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0], root / "a");
  EXPECT_EQ(found[1], root / "group/b");
  EXPECT_EQ(found[2], root / "group/deeper/c");
  // The root itself may be a run.
  EXPECT_EQ(find_run_dirs(root / "a"), std::vector<fs::path>{root / "a"});
  EXPECT_TRUE(find_run_dirs(root / "empty").empty());
}

TEST(ListRuns, AMissingRootIsAnErrorNamingIt) {
  TempDir root;
  try {
    find_run_dirs(root / "nope");
    FAIL() << "no error";
  } catch (const RunDirError& e) {
    EXPECT_NE(std::string(e.what()).find((root / "nope").string()), std::string::npos) << e.what();
  }
  write_text(root / "file", "");
  EXPECT_THROW(find_run_dirs(root / "file"), RunDirError);
}

TEST(ListRuns, SummaryReadsMetricsLedgerCheckpointsAndSpec) {
  TempDir root;
  const fs::path dir = root / "r";
  // A frozen spec loads through spec::load as the worker's does.
  make_run(dir, test::minimal_spec("[train]\nepochs = 3\nmax_steps = 900\n"));
  write_text(dir / "metrics.jsonl",
             "{\"kind\":\"train\",\"step\":100,\"epoch\":1,\"loss\":2.0}\n"
             "{\"kind\":\"eval\",\"step\":100,\"epoch\":1,\"top1\":0.5}\n"
             "{\"kind\":\"train\",\"step\":200,\"epoch\":2,\"loss\":1.0}\n"
             "{\"kind\":\"eval\",\"step\":200,\"epoch\":2,\"top1\":0.75}\n"
             "{\"kind\":\"train\",\"step\":250,\"epoch\":2,\"loss\":0.9}\n");
  write_text(dir / "attempts.jsonl",
             "{\"job_id\":\"5\",\"restart\":0,\"reason\":\"requeued\"}\n"
             "{\"job_id\":\"5\",\"restart\":1,\"reason\":\"requeued\"}\n"
             "{\"job_id\":\"5\",\"restart\":2,\"reason\":\"completed\"}\n");
  write_text(dir / "checkpoints/step-000000200/manifest.json", "{}");
  write_text(dir / "checkpoints/step-000000250/data", "uncommitted: no manifest");
  const auto s = summarize_run(dir);
  EXPECT_EQ(s.step, 250);
  EXPECT_EQ(s.epoch, 2);
  EXPECT_EQ(s.max_steps, 900);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_EQ(s.top1, 0.75);
  EXPECT_EQ(s.attempts, 3u);
  EXPECT_EQ(s.restarts, 2);
  EXPECT_EQ(s.checkpoint_step, 200);
  ASSERT_TRUE(s.checkpoint_age_s);
  EXPECT_GE(*s.checkpoint_age_s, 0);
  EXPECT_LT(*s.checkpoint_age_s, 60);
  // Without max_steps the total is unknown; an empty run has none of it.
  make_run(root / "fresh", test::minimal_spec("[train]\nepochs = 2\n"));
  const auto f = summarize_run(root / "fresh");
  EXPECT_FALSE(f.step);
  EXPECT_FALSE(f.max_steps);
  EXPECT_EQ(f.epochs, 2);
  EXPECT_FALSE(f.top1);
  EXPECT_EQ(f.attempts, 0u);
  EXPECT_FALSE(f.checkpoint_step);
  // A broken spec leaves the totals unknown and nothing else.
  make_run(root / "broken", "[train\n");
  EXPECT_FALSE(summarize_run(root / "broken").epochs);
  // Said, not ignored: the summary names the file and the problem.
  EXPECT_NE(summarize_run(root / "broken").spec_error.find((root / "broken/spec.toml").string()),
            std::string::npos);
  EXPECT_TRUE(summarize_run(dir).spec_error.empty());
}

TEST(ListRuns, ArrayTaskFolders) {
  TempDir root;
  make_run(root / "sweep");
  for (const char* t : {"task-002", "task-000", "task-001"}) {
    write_text(root / "sweep" / t / "spec.toml", "");
  }
  fs::create_directories(root / "sweep/task-003");  // no spec: not a task
  fs::create_directories(root / "sweep/task-x");
  const auto tasks = array_task_dirs(root / "sweep");
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].first, 0u);
  EXPECT_EQ(tasks[2].first, 2u);
  EXPECT_EQ(tasks[2].second, root / "sweep/task-002");
}

slurm::JobState job_state(const std::string& id, const std::string& state,
                          const std::string& reason = "None") {
  slurm::JobState s;
  s.job_id = id;
  s.state = state;
  s.reason = reason;
  s.nodes = "node[1-2]";
  s.source = "squeue";
  return s;
}

// What status reads of a run directory: all of it, with its array tasks.
Snapshot snapshot_of(const fs::path& dir) {
  return read_snapshot(dir, {/*spec=*/false, /*tasks=*/true});
}

// Four runs: submitted and known to Slurm, submitted and forgotten by it (its ledger speaks),
// never submitted, and an array of two tasks.
struct ListFixture {
  TempDir root;
  ListFixture() {
    make_run(root / "live", test::minimal_spec("[train]\nmax_steps = 900\n"));
    records::append_submission(root / "live", {"11", "2026-11-22T02:48:07Z", 0});
    write_text(root / "live/metrics.jsonl",
               "{\"kind\":\"train\",\"step\":300,\"epoch\":1,\"loss\":2.0}\n"
               "{\"kind\":\"eval\",\"step\":300,\"epoch\":1,\"top1\":0.75}\n");
    make_run(root / "old", test::minimal_spec("[train]\nepochs = 3\n"));
    records::append_submission(root / "old", {"7", "2026-11-20T02:48:07Z", 0});
    write_text(root / "old/attempts.jsonl",
               "{\"job_id\":\"7\",\"restart\":0,\"reason\":\"requeued\"}\n"
               "{\"job_id\":\"7\",\"restart\":1,\"reason\":\"completed\"}\n");
    write_text(root / "old/metrics.jsonl", "{\"kind\":\"train\",\"step\":40,\"epoch\":2}\n");
    make_run(root / "new");
    make_run(root / "sweep");
    records::append_submission(root / "sweep", {"20", "2026-11-22T02:48:07Z", 2});
    for (const char* t : {"task-000", "task-001"}) write_text(root / "sweep" / t / "spec.toml", "");
  }
};

TEST(ListRows, OneEntryPerRunAndPerArrayTask) {
  ListFixture f;
  std::vector<std::string> job_ids;
  const auto entries = list_entries(find_run_dirs(f.root.path()), job_ids);
  EXPECT_EQ(job_ids, (std::vector<std::string>{"11", "7", "20"}));
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries[0].dir, f.root / "live");
  EXPECT_EQ(entries[0].job_id, "11");
  EXPECT_TRUE(entries[0].submitted);
  EXPECT_FALSE(entries[0].task);
  EXPECT_EQ(entries[1].dir, f.root / "new");
  EXPECT_EQ(entries[1].job_id, "");
  EXPECT_FALSE(entries[1].submitted);
  EXPECT_EQ(entries[3].dir, f.root / "sweep/task-000");
  EXPECT_EQ(entries[3].job_id, "20_0");
  EXPECT_EQ(entries[3].task, 0u);
  EXPECT_EQ(entries[4].job_id, "20_1");
}

TEST(ListRows, StateFromSlurmTheLedgerOrNeither) {
  ListFixture f;
  std::vector<std::string> job_ids;
  const auto entries = list_entries(find_run_dirs(f.root.path()), job_ids);
  const auto out = list_rows(f.root.path(), entries,
                             {job_state("11", "RUNNING"), job_state("20_1", "PENDING")}, "");
  EXPECT_FALSE(out.contains("slurm_error"));
  const auto& runs = out["runs"];
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[0]["name"], "live");
  EXPECT_EQ(runs[0]["state"], "RUNNING");
  EXPECT_EQ(runs[0]["state_source"], "squeue");
  EXPECT_EQ(runs[0]["step"], 300);
  EXPECT_EQ(runs[0]["max_steps"], 900);
  EXPECT_EQ(runs[0]["top1"], 0.75);
  EXPECT_EQ(runs[1]["name"], "new");
  EXPECT_EQ(runs[1]["state"], "unsubmitted");
  EXPECT_TRUE(runs[1]["job_id"].is_null());
  EXPECT_EQ(runs[2]["name"], "old");
  EXPECT_EQ(runs[2]["state"], "ledger:completed");  // Slurm has forgotten job 7
  EXPECT_EQ(runs[2]["state_source"], "ledger");
  EXPECT_EQ(runs[2]["restarts"], 1);
  EXPECT_EQ(runs[3]["name"], "sweep/task-000");
  EXPECT_EQ(runs[3]["task"], 0);
  EXPECT_EQ(runs[3]["state"], "unknown");  // no Slurm state, no ledger
  EXPECT_TRUE(runs[3]["state_source"].is_null());
  EXPECT_EQ(runs[4]["state"], "PENDING");
  // A failed query: the error is kept; a run whose ledger says it ended keeps that state, the
  // others' are unknown.
  const auto failed = list_rows(f.root.path(), entries, {}, "squeue: timed out");
  EXPECT_EQ(failed["slurm_error"], "squeue: timed out");
  EXPECT_EQ(failed["runs"][0]["state"], "unknown");
  EXPECT_EQ(failed["runs"][1]["state"], "unsubmitted");
  EXPECT_EQ(failed["runs"][2]["state"], "ledger:completed");
  EXPECT_EQ(failed["runs"][2]["state_source"], "ledger");
}

TEST(ListRows, TheTable) {
  ListFixture f;
  std::vector<std::string> job_ids;
  const auto entries = list_entries(find_run_dirs(f.root.path()), job_ids);
  std::ostringstream table;
  print_list(table, list_rows(f.root.path(), entries, {job_state("11", "RUNNING")}, ""));
  std::istringstream lines(table.str());
  std::string header, live, fresh, old;
  std::getline(lines, header);
  std::getline(lines, live);
  std::getline(lines, fresh);
  std::getline(lines, old);
  EXPECT_EQ(
      header,
      "RUN             STATE             STEP                TOP-1    RESTARTS  ENDED         "
      "GOODPUT       CHECKPOINT");
  // The live run's job runs with no attempt started yet: all queue wait so far.
  EXPECT_EQ(live,
            "live            RUNNING           300/900             75.00%   0         -            "
            " 0.0% so far   none");
  EXPECT_EQ(fresh,
            "new             unsubmitted       -                   -        0         -            "
            " -             none");
  EXPECT_EQ(old,
            "old             ledger:completed  40 (epoch 2/3)      -        1         -            "
            " -             none");
}

TEST(StatusReport, SubmissionSlurmAndTheRunDirectory) {
  ListFixture f;
  const fs::path dir = f.root / "live";
  const auto report = status_report(snapshot_of(dir),
                                    {job_state("11", "RUNNING"), job_state("11.0", "RUNNING")}, "");
  EXPECT_EQ(report["run_dir"], dir.string());
  EXPECT_EQ(report["job_id"], "11");
  EXPECT_EQ(report["submitted_at"], "2026-11-22T02:48:07Z");
  ASSERT_EQ(report["slurm"].size(), 2u);
  EXPECT_EQ(report["slurm"][0]["state"], "RUNNING");
  EXPECT_EQ(report["slurm"][0]["source"], "squeue");
  EXPECT_FALSE(report.contains("slurm_error"));
  EXPECT_FALSE(report.contains("tasks"));
  EXPECT_EQ(report["last_train"]["step"], 300);  // describe_run_dir's fields, merged in
  EXPECT_EQ(report["attempts"], 0);

  const auto fresh = status_report(snapshot_of(f.root / "new"), {}, "");
  EXPECT_TRUE(fresh["job_id"].is_null());
  EXPECT_FALSE(fresh.contains("submitted_at"));

  const auto sweep = status_report(snapshot_of(f.root / "sweep"), {}, "squeue: timed out");
  EXPECT_EQ(sweep["slurm_error"], "squeue: timed out");
  ASSERT_EQ(sweep["tasks"].size(), 2u);
  EXPECT_EQ(sweep["tasks"][1]["task"], 1);
  EXPECT_FALSE(sweep.contains("attempts"));  // the tasks' own
}

// A run Slurm would not requeue, continued by a chain of three jobs (docs/preemption.md): status
// names every job of the chain and counts the attempts the chain continued, never calls one
// requeued; list says so after the restarts.
TEST(StatusReport, AChainShowsEveryJobAndNoRequeue) {
  TempDir root;
  const fs::path dir = root / "chained";
  make_run(dir);
  records::append_submission(dir, {"5", "2026-11-21T00:00:00Z", 0});
  records::append_submission(dir, {"7", "2026-11-22T02:48:07Z", 0});
  records::append_submission(dir, {"8", "2026-11-22T03:00:00Z", 0, "7"});
  records::append_submission(dir, {"9", "2026-11-22T04:00:00Z", 0, "8"});
  write_text(
      dir / "attempts.jsonl",
      "{\"job_id\":\"7\",\"restart\":0,\"exit_status\":75,\"reason\":\"chained\"}\n"
      "{\"job_id\":\"8\",\"restart\":1,\"exit_status\":75,\"reason\":\"chained\"}\n"
      "{\"job_id\":\"9\",\"restart\":2,\"exit_status\":0,\"reason\":\"completed\","
      "\"nodes\":\"n1\",\"start\":\"2026-11-22T04:00:10Z\",\"end\":\"2026-11-22T04:09:00Z\"}\n");
  const auto report = status_report(snapshot_of(dir), {job_state("9", "COMPLETED")}, "");
  EXPECT_EQ(report["job_id"], "9");
  EXPECT_EQ(report["chain"], nlohmann::json({"7", "8", "9"}))
      << "status shows only the last job of a chain";
  EXPECT_EQ(report["attempts"], 3);
  EXPECT_EQ(report["restarts"], 2);
  EXPECT_EQ(report["chained"], 2);
  std::ostringstream text;
  print_status(text, report);
  EXPECT_NE(text.str().find("job:        9 (submitted 2026-11-22T04:00:00Z)\n"
                            "chain:      7 -> 8 -> 9 (each job continued the one before: Slurm "
                            "refused the requeue)\n"),
            std::string::npos)
      << "status does not show the chain's jobs:\n"
      << text.str();
  EXPECT_NE(text.str().find("attempts:   3 (2 restarts, 2 of them by a chain)\n"
                            "last:       completed, exit status 0, 2026-11-22T04:00:10Z .. "
                            "2026-11-22T04:09:00Z on n1\n"),
            std::string::npos)
      << text.str();
  EXPECT_EQ(text.str().find("requeued"), std::string::npos)
      << "status calls a chained run requeued:\n"
      << text.str();

  std::vector<std::string> job_ids;
  const auto entries = list_entries(find_run_dirs(root.path()), job_ids);
  EXPECT_EQ(job_ids, (std::vector<std::string>{"9"}));
  const auto listing = list_rows(root.path(), entries, {job_state("9", "COMPLETED")}, "");
  EXPECT_EQ(listing["runs"][0]["chain"], nlohmann::json({"7", "8", "9"}));
  EXPECT_EQ(listing["runs"][0]["chained"], 2);
  std::ostringstream table;
  print_list(table, listing);
  EXPECT_NE(table.str().find("\nchained  COMPLETED         -                   -        "
                             "2 (chain: 3 jobs)  -             0.0%          none\n"),
            std::string::npos)
      << "list does not say the run went on in a chain:\n"
      << table.str();
  // A plain run: its one job, nothing said.
  records::append_submission(dir, {"10", "2026-11-23T00:00:00Z", 0});
  EXPECT_EQ(status_report(snapshot_of(dir), {}, "")["chain"], nlohmann::json({"10"}));
}

TEST(StatusReport, AsPrinted) {
  ListFixture f;
  const fs::path dir = f.root / "live";
  std::ostringstream live;
  // Asked a minute after the submit: the goodput ledger's minute of queue wait.
  const double now = *parse_utc("2026-11-22T02:49:07Z");
  print_status(live,
               status_report(snapshot_of(dir), {job_state("11", "PENDING", "Priority")}, "", now));
  EXPECT_EQ(live.str(),
            "run:        " + dir.string() +
                "\n"
                "job:        11 (submitted 2026-11-22T02:48:07Z)\n"
                "slurm:      11 PENDING (Priority) [squeue]\n"
                "attempts:   0 (0 restarts)\n"
                "checkpoint: none committed\n"
                "train:      step 300, epoch 1, loss 2.0000, lr ?, ? images/s (the last log "
                "window), loss "
                "scale ?\n"
                "trend:      loss 2 at step 300  \u2584\n"
                "eval:       step 300, epoch 1, top-1 75.00%, top-5 ?%, loss ? (? images)\n"
                "goodput 0.0% so far: training 0.0s of 1m00s; queue 1m00s\n");
  std::ostringstream fresh;
  print_status(fresh, status_report(snapshot_of(f.root / "new"), {}, ""));
  EXPECT_NE(fresh.str().find("job:        not submitted\n"), std::string::npos) << fresh.str();
  std::ostringstream sweep;
  print_status(sweep, status_report(snapshot_of(f.root / "sweep"), {}, "squeue: timed out"));
  EXPECT_NE(sweep.str().find("slurm:      unavailable: squeue: timed out\n"
                             "task 0:\n  attempts:   0 (0 restarts)\n"),
            std::string::npos)
      << sweep.str();
  // A record that names its window (the worker's window_first_step): status names the same
  // steps as the log line.
  std::ofstream(dir / "metrics.jsonl", std::ios::app)
      << "{\"kind\":\"train\",\"step\":500,\"epoch\":2,\"images_per_s\":742.4,"
         "\"window_first_step\":406,\"window_seconds\":12.5}\n";
  std::ostringstream windowed;
  print_status(windowed, status_report(snapshot_of(dir), {}, ""));
  EXPECT_NE(windowed.str().find(", 742 images/s (steps 406-500), "), std::string::npos)
      << windowed.str();
  // The divergence guard's rollbacks: how many, and the last.
  std::ofstream(dir / "metrics.jsonl", std::ios::app)
      << "{\"kind\":\"rollback\",\"step\":15,\"rolled_back_to\":10,\"skipped_from\":11,"
         "\"samples_skipped\":160,\"rollbacks\":1,\"message\":\"the loss is nan\"}\n"
      << "{\"kind\":\"rollback\",\"step\":52,\"rolled_back_to\":45,\"skipped_from\":46,"
         "\"samples_skipped\":224,\"rollbacks\":2,\"message\":\"the loss is -nan over steps "
         "49-52\"}\n";
  const auto rolled = status_report(snapshot_of(dir), {}, "");
  EXPECT_EQ(rolled["rollbacks"].size(), 2u);
  EXPECT_EQ(rolled["rollbacks"][1]["rolled_back_to"], 45);
  std::ostringstream rolled_text;
  print_status(rolled_text, rolled);
  EXPECT_NE(rolled_text.str().find("rollbacks:  2 (the last at step 52: back to the checkpoint of "
                                   "step 45, 224 samples skipped; the loss is -nan over steps "
                                   "49-52)\n"),
            std::string::npos)
      << rolled_text.str();
  std::ostringstream purged;
  print_status(purged, status_report(snapshot_of(dir), {}, ""));
  EXPECT_NE(purged.str().find("slurm:      unknown to squeue and sacct (finished and purged, or "
                              "accounting off); see the attempts below\n"),
            std::string::npos)
      << purged.str();
}

TEST(RunLog, AttemptMarkersAndRankPrefixes) {
  EXPECT_EQ(attempt_marker("hpctrain: job 4711 attempt 2 on node[01-02] at 2026-11-22T02:48:10Z"),
            2);
  EXPECT_EQ(attempt_marker("hpctrain: job 4711_3 attempt 1 on n1 at 2026-11-22T02:48:10Z"), 1);
  for (const char* other :
       {"hpctrain: attempt ended: status 0, completed", "hpctrain: job 4711 attempt x on n at t",
        "[rank 0/2 n1] hpctrain: job 4711 attempt 2 on n1 at t", "",
        "hpctrain: job  attempt 1 on"}) {
    EXPECT_FALSE(attempt_marker(other)) << other;
  }
  EXPECT_EQ(line_rank("[rank 3/16 node017] train.cpp:42: oops"), 3);
  EXPECT_EQ(line_rank("[rank 0/1 localhost] final: top-1"), 0);
  for (const char* other : {"[rank 3] x", "[node017] x", " [rank 3/16 n] x", "[rank a/2 n] x",
                            "srun: error: node1: task 1", "[rank 3/16 n]"}) {
    EXPECT_FALSE(line_rank(other)) << other;
  }
}

TEST(RunLog, FilterByAttemptAndRank) {
  const std::vector<std::string> log = {"setup of attempt 1",
                                        "hpctrain: job 9 attempt 1 on n1 at t1",
                                        "[rank 0/2 n1] a1 r0",
                                        "[rank 1/2 n1] a1 r1",
                                        "[rank 10/20 n1] not rank 1",
                                        "hpctrain: attempt ended: status 75, requeued",
                                        "hpctrain: job 9 attempt 2 on n1 at t2",
                                        "[rank 1/2 n1] a2 r1",
                                        "hpctrain: attempt ended: status 0, completed"};
  auto run_filter = [&](std::optional<int64_t> attempt, std::optional<int64_t> rank) {
    LogFilter f(attempt, rank);
    std::vector<std::string> kept;
    for (const auto& l : log) {
      if (f.keep(l)) kept.push_back(l);
    }
    return kept;
  };
  EXPECT_EQ(run_filter(std::nullopt, std::nullopt), log);
  EXPECT_EQ(run_filter(1, std::nullopt), std::vector<std::string>(log.begin(), log.begin() + 6));
  EXPECT_EQ(run_filter(2, std::nullopt), std::vector<std::string>(log.begin() + 6, log.end()));
  EXPECT_EQ(run_filter(std::nullopt, 1),
            (std::vector<std::string>{"[rank 1/2 n1] a1 r1", "[rank 1/2 n1] a2 r1"}));
  EXPECT_EQ(run_filter(2, 1), (std::vector<std::string>{"[rank 1/2 n1] a2 r1"}));
  EXPECT_TRUE(run_filter(3, std::nullopt).empty());
  LogFilter f(std::nullopt, std::nullopt);
  for (const auto& l : log) f.keep(l);
  EXPECT_EQ(f.highest_attempt(), 2);
}

spec::Resolved resolved_for_ops(const TempDir& dir, const std::string& run,
                                const std::string& extra = {}) {
  write_text(dir / "spec.toml", "[job]\nname = \"t\"\nrun_dir = \"" + (dir / run).string() +
                                    "\"\n[data]\nsynthetic = true\n" + extra);
  return spec::load(test::options_for(dir / "spec.toml"));
}

// A submitted run of 3 ranks (job 77) whose rank 1 wrote to stderr only, as the worker's ranks
// other than 0 do: its warnings and errors go to stderr, srun sends them to the .err file.
fs::path three_rank_run(const TempDir& dir) {
  write_text(dir / "spec.toml", "[job]\nname = \"t\"\nrun_dir = \"" + (dir / "run").string() +
                                    "\"\ntasks_per_node = 3\n[data]\nsynthetic = true\n");
  prepare(spec::load(test::options_for(dir / "spec.toml")), "#!/bin/bash\n", false);
  records::append_submission(dir / "run", {"77", "2026-11-22T02:48:07Z", 0});
  write_text(dir / "run/logs/slurm-77.out",
             "hpctrain: job 77 attempt 1 on n1 at t1\n[rank 0/3 n1] step 10\n"
             "hpctrain: attempt ended: status 75, requeued\n"
             "hpctrain: job 77 attempt 2 on n1 at t2\n[rank 0/3 n1] step 20\n"
             "[rank 1/3 n1] printed on stdout in attempt 2\n");
  write_text(dir / "run/logs/slurm-77.err",
             "[rank 1/3 n1] warning: slow disk\nsrun: error: n1: task 2: Exited\n"
             "[rank 1/3 n1] error: gave up");
  return dir / "run";
}

TEST(RunLog, ARanksLinesFromTheOutThenTheErr) {
  TempDir dir;
  const fs::path run = three_rank_run(dir);
  auto print = [&](LogSelection sel, std::string* note = nullptr) {
    std::ostringstream out;
    const std::string n = print_log(resolve_log(run, sel), sel, out);
    if (note) *note = n;
    return out.str();
  };
  EXPECT_EQ(print({1, std::nullopt, std::nullopt, false}),
            "[rank 1/3 n1] printed on stdout in attempt 2\n[rank 1/3 n1] warning: slow disk\n"
            "[rank 1/3 n1] error: gave up");
  EXPECT_EQ(print({1, std::nullopt, std::nullopt, true}),
            "[rank 1/3 n1] warning: slow disk\n[rank 1/3 n1] error: gave up");
  EXPECT_EQ(print({0, std::nullopt, std::nullopt, false}),
            "[rank 0/3 n1] step 10\n[rank 0/3 n1] step 20\n");
  // With --attempt: the .out's lines of that attempt; the .err's are counted, not shown.
  std::string note;
  EXPECT_EQ(print({1, 2, std::nullopt, false}, &note),
            "[rank 1/3 n1] printed on stdout in attempt 2\n");
  EXPECT_NE(note.find("slurm-77.err holds 2 more lines of rank 1"), std::string::npos) << note;
  EXPECT_NE(note.find("--rank 1 --stderr"), std::string::npos) << note;
  // No line of the rank: an error naming both files, not an empty success.
  try {
    print({2, std::nullopt, std::nullopt, false});
    ADD_FAILURE() << "rank 2 printed nothing and succeeded";
  } catch (const ExitWith& e) {
    EXPECT_EQ(e.status(), kExitFailure);
    const std::string what = e.what();
    EXPECT_NE(what.find("no line of rank 2 in " + (run / "logs/slurm-77.out").string() + " or " +
                        (run / "logs/slurm-77.err").string()),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(print({1, 1, std::nullopt, false}), ExitWith);  // rank 1 is in the .err only
  // A rank beyond the world: the error names the world size.
  try {
    print({3, std::nullopt, std::nullopt, false});
    ADD_FAILURE() << "--rank 3 of 3 accepted";
  } catch (const ExitWith& e) {
    EXPECT_EQ(e.status(), kExitBadInput);
    EXPECT_NE(std::string(e.what()).find("--rank 3: the run has 3 ranks"), std::string::npos)
        << e.what();
  }
}

TEST(RunLog, FollowingARankReadsTheErrToo) {
  TempDir dir;
  const fs::path run = three_rank_run(dir);
  test::FakeSlurm slurm;  // every job COMPLETED
  slurm.state = "COMPLETED";
  slurm.reason = "0:0";
  slurm.nodes = "n1";
  const volatile std::sig_atomic_t never = 0;
  const LogSelection one{1, std::nullopt, std::nullopt, false};
  std::ostringstream out;
  EXPECT_EQ(follow_log(resolve_log(run, one), one, slurm, 0, never, out), "");
  EXPECT_EQ(out.str(),
            "[rank 1/3 n1] printed on stdout in attempt 2\n[rank 1/3 n1] warning: slow disk\n"
            "[rank 1/3 n1] error: gave up");
  const LogSelection two{2, std::nullopt, std::nullopt, false};
  std::ostringstream none;
  const std::string note = follow_log(resolve_log(run, two), two, slurm, 0, never, none);
  EXPECT_EQ(none.str(), "");
  EXPECT_NE(note.find("no line of rank 2 in "), std::string::npos) << note;
}

TEST(Submit, ADryRunDoesNotBlockAChangedSubmit) {
  TempDir dir;
  const auto first = resolved_for_ops(dir, "run");
  EXPECT_FALSE(prepare(first, "s1", false).unsubmitted_spec_replaced);
  const auto second = resolved_for_ops(dir, "run", "[train]\nepochs = 9\n");
  const auto p = prepare(second, "s2", /*force=*/false);
  EXPECT_TRUE(p.unsubmitted_spec_replaced);
  EXPECT_FALSE(p.spec_changed);
  EXPECT_EQ(read_text(dir / "run/spec.toml"), spec::freeze(second.spec));
  EXPECT_EQ(read_text(dir / "run/job.sbatch"), "s2");
  // Once anything ran there (an attempt, metrics, a checkpoint), the spec is protected again.
  for (const char* trace : {"attempts.jsonl", "metrics.jsonl", "checkpoints/x"}) {
    TempDir d;
    prepare(resolved_for_ops(d, "run"), "s1", false);
    write_text(d / "run" / trace, "");
    EXPECT_THROW(prepare(resolved_for_ops(d, "run", "[train]\nepochs = 9\n"), "s2", false),
                 RunDirError)
        << trace;
  }
  // Array tasks: a trace in a task folder counts too.
  TempDir a;
  const std::string sweep = "[sweep.params]\n\"train.seed\" = [1, 2]\n";
  prepare(resolved_for_ops(a, "run", sweep), "s1", false);
  write_text(a / "run/task-001/metrics.jsonl", "");
  EXPECT_THROW(prepare(resolved_for_ops(a, "run", sweep + "[train]\nepochs = 9\n"), "s2", false),
               RunDirError);
}

TEST(Submit, DiscardRemovesOnlyWhatThisSubmitCreated) {
  TempDir dir;
  // Created here, with two new parents: all three go, the existing root stays.
  const auto p = prepare(resolved_for_ops(dir, "x/y/run"), "s", false);
  EXPECT_EQ(p.created, dir / "x");
  EXPECT_TRUE(discard_unsubmitted(p));
  EXPECT_FALSE(fs::exists(dir / "x"));
  EXPECT_TRUE(fs::exists(dir.path()));
  // A parent that another run fills meanwhile stays.
  const auto q = prepare(resolved_for_ops(dir, "x/run"), "s", false);
  write_text(dir / "x/other/spec.toml", "");
  EXPECT_TRUE(discard_unsubmitted(q));
  EXPECT_FALSE(fs::exists(dir / "x/run"));
  EXPECT_TRUE(fs::exists(dir / "x/other/spec.toml"));
  // A directory that existed before (a dry run, earlier submissions) is left alone.
  const auto dry = prepare(resolved_for_ops(dir, "kept"), "s", false);
  const auto again = prepare(resolved_for_ops(dir, "kept"), "s", false);
  EXPECT_TRUE(again.created.empty());
  EXPECT_FALSE(discard_unsubmitted(again));
  EXPECT_TRUE(fs::exists(dir / "kept/spec.toml"));
  // One that got a submission meanwhile is kept too.
  records::append_submission(dir / "kept", {"7", "t", 0});
  EXPECT_FALSE(discard_unsubmitted(dry));
  EXPECT_TRUE(fs::exists(dir / "kept/submissions.jsonl"));
}

TEST(Cancel, AJobThatEndedIsNamedWithWhoSaysSo) {
  const std::vector<records::Attempt> none;
  EXPECT_EQ(job_already_ended("5", {{"5", "COMPLETED", "None", "n1", "squeue"}}, none),
            "COMPLETED, per squeue");
  EXPECT_FALSE(job_already_ended("5", {{"5", "RUNNING", "None", "n1", "squeue"}}, none));
  EXPECT_FALSE(job_already_ended("5", {{"5", "REQUEUED", "None", "n1", "squeue"}}, none));
  // An array: every task, each state once.
  EXPECT_EQ(job_already_ended("6",
                              {{"6_0", "COMPLETED", "", "", "sacct"},
                               {"6_1", "FAILED", "", "", "sacct"},
                               {"6_2", "COMPLETED", "", "", "sacct"}},
                              none),
            "COMPLETED, FAILED, per sacct");
  EXPECT_FALSE(job_already_ended(
      "6", {{"6_0", "COMPLETED", "", "", "squeue"}, {"6_1", "PENDING", "", "", "squeue"}}, none));
  // Slurm has forgotten it: the ledger's last line of this job.
  std::vector<records::Attempt> ledger(2);
  ledger[0].job_id = "7";
  ledger[0].reason = records::Reason::kRequeued;
  ledger[1].job_id = "7";
  ledger[1].reason = records::Reason::kCompleted;
  EXPECT_EQ(job_already_ended("7", {}, ledger), "completed, per the run's ledger attempts.jsonl");
  EXPECT_FALSE(job_already_ended("8", {}, ledger));  // another job's ledger lines
  ledger.pop_back();
  EXPECT_FALSE(job_already_ended("7", {}, ledger));  // requeued: another attempt may come
  EXPECT_FALSE(job_already_ended("7", {}, none));
  EXPECT_TRUE(is_already_ended_message(
      "scancel: error: Kill job error on job id 9: Job/step already completing or completed"));
  EXPECT_FALSE(is_already_ended_message("scancel: error: Invalid job id specified"));
}

TEST(SlurmMessages, NoControllerIsRecognised) {
  EXPECT_TRUE(slurm::is_unreachable_message(
      "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect "
      "failure)\n"));
  EXPECT_TRUE(slurm::is_unreachable_message(
      "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\nsbatch: error: "
      "fetch_config: DNS SRV lookup failed\nsbatch: fatal: Could not establish a configuration "
      "source\n"));
  EXPECT_FALSE(slurm::is_unreachable_message(
      "sbatch: error: Batch job submission failed: Invalid partition name specified\n"));
  EXPECT_FALSE(slurm::is_unreachable_message("scancel: error: Invalid job id 12\n"));
  EXPECT_TRUE(slurm::is_terminal_state("COMPLETED"));
  EXPECT_TRUE(slurm::is_terminal_state("CANCELLED"));
  for (const char* live : {"PENDING", "RUNNING", "REQUEUED", "COMPLETING", "REQUEUE_HOLD", ""}) {
    EXPECT_FALSE(slurm::is_terminal_state(live)) << live;
  }
}

}  // namespace
}  // namespace hpctrain::run
