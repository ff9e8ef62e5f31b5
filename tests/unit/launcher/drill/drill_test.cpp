// hpctrain drill's pure parts (drill/drill.hpp): the events by name, the short spec's overrides,
// whether a run can survive a preemption before anything is played, what an event led to as the
// run directory records it, the final weights' fingerprints and the table. tests/slurm/drill.sh
// plays the drill on the local cluster.
#include "drill/drill.hpp"

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "support/test_util.hpp"

namespace hpctrain::drill {
namespace {

using records::Reason;

TEST(Drill, EventsByName) {
  EXPECT_EQ(parse_events("preempt,requeue,hang"),
            (std::vector<Event>{Event::kPreempt, Event::kRequeue, Event::kHang}));
  EXPECT_EQ(parse_events("hang,,preempt"), (std::vector<Event>{Event::kHang, Event::kPreempt}));
  try {
    parse_events("preempt,kill");
    FAIL() << "an unknown event accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "--events: no event 'kill' (the events: preempt, requeue, hang, kill-node)");
  }
  EXPECT_THROW(parse_events(","), std::invalid_argument);
  EXPECT_EQ(parse_events("kill-node"), (std::vector<Event>{Event::kKillNode}));
  EXPECT_EQ(name_of(Event::kKillNode), "kill-node");
  EXPECT_EQ(title_of(Event::kKillNode), "killed node");
}

TEST(Drill, AKilledNodeIsPlayedByDefaultWhereThereIsASpare) {
  spec::Spec spec;
  EXPECT_EQ(default_events(spec),
            (std::vector<Event>{Event::kPreempt, Event::kRequeue, Event::kHang}));
  spec.resilience.spare_nodes = 1;
  EXPECT_EQ(default_events(spec),
            (std::vector<Event>{Event::kPreempt, Event::kRequeue, Event::kHang, Event::kKillNode}));
}

TEST(Drill, TheShortSpecCheckpointsEveryEighthOfItsSteps) {
  Options o;
  o.steps = 60;
  o.time = "00:20:00";
  EXPECT_EQ(drill_overrides("r20-drill", "/scratch/d/drilled", o),
            (std::vector<std::string>{"job.name=r20-drill", "job.run_dir=/scratch/d/drilled",
                                      "job.time=00:20:00", "train.max_steps=60",
                                      "train.eval_every_epochs=0", "checkpoint.every_steps=7",
                                      "checkpoint.every_minutes=0"}));
  o.steps = 5;
  EXPECT_EQ(drill_overrides("a", "/d", o)[5], "checkpoint.every_steps=1");
}

TEST(Drill, ReadinessFromTheSpecAndSlurmsWordOnRequeue) {
  spec::Spec s;
  s.preemption.enabled = true;
  EXPECT_TRUE(readiness(s, true, "7").problem.empty());
  EXPECT_TRUE(readiness(s, std::nullopt, "7").problem.empty()) << "unknown: find out by playing";
  const Readiness refused = readiness(s, false, "7");
  EXPECT_EQ(refused.problem,
            "Slurm will not requeue job 7 (scontrol show job: Requeue=0; JobRequeue=0 in "
            "slurm.conf or a site policy), and preemption.chain is false: a preempted run would "
            "end there; set preemption.chain = true");
  s.preemption.chain = true;
  const Readiness chained = readiness(s, false, "7");
  EXPECT_TRUE(chained.problem.empty());
  EXPECT_NE(chained.note.find("the run goes on by a job chain (preemption.chain = true)"),
            std::string::npos);
  s.preemption.enabled = false;
  EXPECT_NE(readiness(s, true, "7").problem.find("preemption.enabled is false"), std::string::npos);
}

records::Attempt line(Reason reason, records::Cause cause, const std::string& job = "7") {
  records::Attempt a;
  a.job_id = job;
  a.reason = reason;
  a.cause = cause;
  return a;
}

records::StartedRecord started(double wall_time, std::optional<int64_t> from) {
  records::StartedRecord r;
  r.wall_time = wall_time;
  r.resumed_from = from;
  return r;
}

TEST(Drill, AnOutcomeIsTheNewLedgerLinesAndTheFirstStartAfterThePlay) {
  run::Snapshot s;
  s.attempts = {line(Reason::kRequeued, records::Cause::kPreempted)};
  s.metrics.records = {started(100, std::nullopt)};
  // Played at 150: the first line was there before; nothing new yet.
  Outcome o = outcome(s, 1, 150);
  EXPECT_FALSE(o.resumed);
  EXPECT_FALSE(o.ended);
  EXPECT_EQ(o.did, "");
  s.attempts.push_back(line(Reason::kTerminated, records::Cause::kPreempted));
  o = outcome(s, 1, 150);
  EXPECT_FALSE(o.ended) << "terminated: Slurm may requeue the job";
  EXPECT_EQ(o.did, "terminated (preempted)");
  s.metrics.records.push_back(started(183.5, 16));
  o = outcome(s, 1, 150);
  EXPECT_TRUE(o.resumed);
  EXPECT_EQ(o.resumed_from, 16);
  EXPECT_DOUBLE_EQ(*o.recovery_s, 33.5);
  // A chain's next job, a replaced node, an exclusion.
  s.chain = {{"7", "t0", 0, ""}, {"9", "t1", 0, "7"}};
  s.attempts = {line(Reason::kChained, records::Cause::kPreempted)};
  EXPECT_EQ(outcome(s, 0, 150).did, "chained to job 9 (preempted)");
  s.attempts = {line(Reason::kFailedChained, records::Cause::kUnknown)};
  EXPECT_EQ(outcome(s, 0, 150).did, "failed_chained to job 9 (unknown)");
  auto lost = line(Reason::kNodeLost, records::Cause::kNodeLost);
  lost.lost_nodes = "n2";
  lost.excluded = "n2";
  s.attempts = {lost};
  EXPECT_EQ(outcome(s, 0, 150).did, "node_lost (node_lost), node n2 replaced, n2 excluded");
}

records::TrainRecord trained(int64_t step, double at) {
  records::TrainRecord r;
  r.step = step;
  r.wall_time = at;
  return r;
}

TEST(Drill, ANoticeNoWorkerHeededIsTrainingGoingOnWellPastIt) {
  run::Snapshot s;
  s.attempts = {line(Reason::kRequeued, records::Cause::kPreempted)};
  s.checkpoint_step = 10;
  s.metrics.records = {trained(8, 100), trained(12, 140)};
  EXPECT_EQ(newest_step(s), 12);
  // Played at 150 at step 12; 16 steps past it is unheeded. A train line from before the play
  // does not count, nor does training a few steps on (the stop comes a step or two later).
  EXPECT_EQ(unheeded_until(s, 1, 150, 12, 16), std::nullopt);
  s.metrics.records.push_back(trained(16, 152));
  s.checkpoint_step = 15;
  EXPECT_EQ(unheeded_until(s, 1, 150, 12, 16), std::nullopt);
  s.metrics.records.push_back(trained(28, 160));
  EXPECT_EQ(unheeded_until(s, 1, 150, 12, 16), 28);
  s.checkpoint_step = 30;
  EXPECT_EQ(unheeded_until(s, 1, 150, 12, 16), 30) << "a committed checkpoint shows it too";
  // A new ledger line: the attempt ended (heeded, or something else ended it): not this.
  s.attempts.push_back(line(Reason::kRequeued, records::Cause::kPreempted));
  EXPECT_EQ(unheeded_until(s, 1, 150, 12, 16), std::nullopt);
  // The run completed without stopping: unheeded, however few steps were left.
  s.attempts.back() = line(Reason::kCompleted, records::Cause::kCompleted);
  s.metrics.records = {trained(14, 151)};
  s.checkpoint_step = 14;
  EXPECT_EQ(unheeded_until(s, 1, 150, 12, 16), 14);
  const std::string text = unheeded_text("USR2", 12, 30);
  EXPECT_NE(text.find("the preemption signal (SIGUSR2) reached no worker: training went on from "
                      "step 12 to step 30 without stopping"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("preemption.signal"), std::string::npos) << text;
}

TEST(Drill, AFailureEndsTheRunUnlessTrainingCameBack) {
  run::Snapshot s;
  s.attempts = {line(Reason::kFailed, records::Cause::kBadInput)};
  const Outcome o = outcome(s, 0, 10);
  EXPECT_TRUE(o.ended);
  EXPECT_FALSE(o.resumed);
  EXPECT_EQ(o.did, "failed (bad_input)");
  for (const Reason r : {Reason::kCompleted, Reason::kFailed, Reason::kRestartLimit,
                         Reason::kSetupFailed, Reason::kNoProgress}) {
    EXPECT_TRUE(ends_run(r)) << records::name_of(r);
  }
  for (const Reason r : {Reason::kRequeued, Reason::kTerminated, Reason::kFailedRequeued,
                         Reason::kNodeLost, Reason::kChained, Reason::kFailedChained}) {
    EXPECT_FALSE(ends_run(r)) << records::name_of(r);
  }
}

TEST(Drill, FinalFingerprintsFromEveryJobsErrorLog) {
  const test::TempDir dir;
  test::write_text(dir / "logs" / "slurm-7.err",
                   "[rank 0/2 vm] weights evaluated at step 10 fnv1a64 0x1111\n"
                   "[rank 0/2 vm] final weights fnv1a64 0xb9280dc1e4e85600 (every rank agrees)\n");
  test::write_text(dir / "logs" / "slurm-9.err",
                   "[rank 1/2 vm] final weights fnv1a64 0xb9280dc1e4e85600\n");
  test::write_text(dir / "logs" / "slurm-9.out", "final weights fnv1a64 0x2222\n");
  EXPECT_EQ(final_fingerprints(dir.path()), (std::set<std::string>{"0xb9280dc1e4e85600"}));
  EXPECT_TRUE(final_fingerprints(dir / "nothing").empty());
}

TEST(Drill, TheTableAlignsItsColumnsAndMarksAFailure) {
  Row ok{"preemption notice", "step 7", "requeued (preempted)", "from step 10", "28.1 s", true};
  Row bad{"requeue", "step 14", "failed (unknown)", "no", "", false};
  EXPECT_EQ(table({ok, bad}),
            "        event              played at  what happened         resumed       recovery\n"
            "        preemption notice  step 7     requeued (preempted)  from step 10  28.1 s\n"
            "FAILED  requeue            step 14    failed (unknown)      no\n");
  EXPECT_EQ(table({ok}),
            "event              played at  what happened         resumed       recovery\n"
            "preemption notice  step 7     requeued (preempted)  from step 10  28.1 s\n");
}

}  // namespace
}  // namespace hpctrain::drill
