// The goodput ledger (run/goodput.hpp) over hand-built ledgers and metrics: a clean run, a
// preempted and requeued one, a node lost inside the allocation, a chain of jobs, a run still
// going (running, and pending after a requeue), a worker without step tags. Each checks every
// part in seconds and that the parts sum to the wall time.
#include <gtest/gtest.h>

#include "common/time.hpp"
#include "run/goodput.hpp"
#include "run/status.hpp"

namespace hpctrain::run::goodput_test {
namespace {

using records::Attempt;
using records::MetricsRecord;
using records::Reason;
using P = GoodputPart;

constexpr double kT = 1'800'000'000;  // an arbitrary Unix time, in whole seconds

std::string utc(double offset) { return utc_ms(static_cast<int64_t>((kT + offset) * 1000)); }

Attempt line(std::string job, int64_t restart, int64_t srun_step, double start, double end,
             Reason reason, std::optional<int64_t> last_step) {
  Attempt a;
  a.job_id = std::move(job);
  a.restart = restart;
  a.srun_step = srun_step;
  a.nodes = "node[1-2]";
  a.start = utc(start);
  a.end = utc(end);
  a.reason = reason;
  a.last_step = last_step;
  return a;
}

MetricsRecord started(int64_t step, double at, std::optional<std::string> tag,
                      std::optional<int64_t> resumed_from = std::nullopt) {
  records::StartedRecord r;
  r.step = step;
  r.tag = std::move(tag);
  r.resumed_from = resumed_from;
  r.wall_time = kT + at;
  return r;
}

MetricsRecord trained(int64_t step, double at, std::optional<double> checkpoint_s = std::nullopt) {
  records::TrainRecord r;
  r.step = step;
  r.loss = 1;
  r.checkpoint_seconds = checkpoint_s;
  r.wall_time = kT + at;
  return r;
}

MetricsRecord evaluated(int64_t step, double at, double seconds) {
  records::EvalRecord r;
  r.step = step;
  r.seconds = seconds;
  r.wall_time = kT + at;
  return r;
}

GoodputClock ended_clock(double submitted) {
  GoodputClock c;
  c.submitted = kT + submitted;
  c.nodes = 2;
  c.gpus_per_node = 4;
  return c;
}

// Every part, in the enum's order, and the wall time they tile.
void expect_parts(const Goodput& g, double wall, std::array<double, kGoodputParts> want) {
  EXPECT_NEAR(g.wall_s, wall, 1e-3);
  for (size_t i = 0; i < kGoodputParts; ++i) {
    EXPECT_NEAR(g.parts.seconds[i], want[i], 1e-3) << goodput_key(static_cast<P>(i));
  }
  EXPECT_NEAR(g.parts.total(), g.wall_s, 1e-6 * g.wall_s + 1e-6);
  double steps = 0;
  for (const auto& s : g.steps) steps += s.parts.total();
  EXPECT_NEAR(steps, g.wall_s, 1e-6 * g.wall_s + 1e-6) << "the steps' parts tile the wall time";
}

//                          queue start train eval ckpt lost recov idle
TEST(Goodput, CleanRunSplitsQueueStartupTrainingEvalStallsAndIdle) {
  // Submitted at 0, started at 60, first step at 70, lines at 120 and 170 (4 s of checkpoint
  // saving in the second window), an 8 s evaluation ending at 180, the attempt's end at 190.
  const std::vector<Attempt> ledger = {line("7", 0, 0, 60, 190, Reason::kCompleted, 100)};
  const std::vector<MetricsRecord> metrics = {started(1, 70, "0.0"), trained(50, 120),
                                              trained(100, 170, 4.0), evaluated(100, 180, 8)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  expect_parts(*g, 190, {60, 10, 98, 8, 4, 0, 0, 10});
  EXPECT_FALSE(g->ongoing);
  EXPECT_NEAR(g->fraction(), 98.0 / 190, 1e-9);
  // Queue wait holds no nodes: 130 s on 2 nodes.
  EXPECT_NEAR(g->node_hours(), 130.0 * 2 / 3600, 1e-9);
  EXPECT_EQ(g->node_hours(P::kQueueWait), 0);
  ASSERT_EQ(g->steps.size(), 1u);
  EXPECT_EQ(g->steps[0].job_id, "7");
}

// status's line and status --json's object for the clean run above.
TEST(Goodput, StatusLineAndJson) {
  const std::vector<Attempt> ledger = {line("7", 0, 0, 60, 190, Reason::kCompleted, 100)};
  const std::vector<MetricsRecord> metrics = {started(1, 70, "0.0"), trained(50, 120),
                                              trained(100, 170, 4.0), evaluated(100, 180, 8)};
  const auto j = goodput_json(*compute_goodput(ledger, metrics, ended_clock(0)));
  EXPECT_EQ(goodput_text(j),
            "51.6%: training 1m38s of 3m10s; queue 1m00s, start-up 10s, eval 8.0s, checkpoint "
            "4.0s, idle 10s; 0.0722 node-hours (0.289 GPU-hours)");
  EXPECT_DOUBLE_EQ(j["wall_s"].get<double>(), 190);
  double sum = 0;
  for (const char* key : {"queue_wait_s", "startup_s", "training_s", "evaluation_s",
                          "checkpoint_stall_s", "work_lost_s", "recovery_s", "idle_end_s"}) {
    sum += j[key].get<double>();
  }
  EXPECT_NEAR(sum, 190, 1e-6);
  EXPECT_NEAR(j["node_hours"]["total"].get<double>(), 130.0 * 2 / 3600, 1e-9);
  EXPECT_EQ(j["node_hours"]["queue_wait"].get<double>(), 0);
  EXPECT_NEAR(j["gpu_hours"]["training"].get<double>(), 98.0 * 8 / 3600, 1e-9);
  EXPECT_EQ(j["begin"], utc(0));
  EXPECT_EQ(j["attempts"].size(), 1u);
  EXPECT_EQ(j["attempts"][0]["reason"], "completed");
  EXPECT_FALSE(j["ongoing"].get<bool>());
}

TEST(Goodput, PreemptedAndRequeuedRunCountsTheRequeueAsQueueAndTheGapsAsRecovery) {
  // Attempt 0 checkpointed at the preemption's step 60 (its last line, at 80) and ended at 90;
  // the requeued job started at 150, trained again at 165 and completed.
  const std::vector<Attempt> ledger = {line("7", 0, 0, 10, 90, Reason::kRequeued, 60),
                                       line("7", 1, 0, 150, 215, Reason::kCompleted, 100)};
  const std::vector<MetricsRecord> metrics = {started(1, 20, "0.0"), trained(50, 70),
                                              trained(60, 80), started(61, 165, "1.0", 60),
                                              trained(100, 205)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  // queue 10 + 60; start-up 10; training 60 + 40; recovery 80..90 and 150..165; idle 205..215.
  expect_parts(*g, 215, {70, 10, 100, 0, 0, 0, 25, 10});
  ASSERT_EQ(g->steps.size(), 2u);
  EXPECT_NEAR(g->steps[1].parts[P::kQueueWait], 60, 1e-3);
  EXPECT_NEAR(g->steps[1].parts[P::kRecovery], 15, 1e-3);
}

// The ledger's times are whole seconds: an attempt that started and ended within the second 60
// (its worker's lines at 60.2 and 60.7) trained for half a second, not none.
TEST(Goodput, AnAttemptShorterThanTheLedgersSecondStillTrains) {
  const std::vector<Attempt> ledger = {line("7", 0, 0, 60, 60, Reason::kCompleted, 10)};
  const std::vector<MetricsRecord> metrics = {started(1, 60.2, "0.0"), trained(10, 60.7)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  expect_parts(*g, 60.7, {60, 0.2, 0.5, 0, 0, 0, 0, 0});
}

TEST(Goodput, LostNodeCountsStepsAfterTheCommittedCheckpointAsLost) {
  // Step 0 of the job attempt committed step 20 (reached at 30), logged step 40 at 50 and lost a
  // node (its line ends at 60); step 1 in the same allocation began at 65, trained from 80.
  const std::vector<Attempt> ledger = {line("12", 0, 0, 0, 60, Reason::kNodeLost, 20),
                                       line("12", 0, 1, 65, 125, Reason::kCompleted, 60)};
  const std::vector<MetricsRecord> metrics = {started(1, 10, "0.0"), trained(20, 30),
                                              trained(40, 50), started(21, 80, "0.1", 20),
                                              trained(60, 120)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(-5));
  ASSERT_TRUE(g);
  // queue 5; start-up 10; training 20 + 40; lost 30..50; recovery 50..60, 60..65 (the
  // allocation held), 65..80; idle 5.
  expect_parts(*g, 130, {5, 10, 60, 0, 0, 20, 30, 5});
  // Recovery between two steps of one attempt holds the allocation.
  EXPECT_NEAR(g->node_hours(P::kRecovery), 30.0 * 2 / 3600, 1e-9);
}

TEST(Goodput, LostWorkInterpolatesBetweenLinesAndLeavesEvaluationsOut) {
  // Committed step 30 lies halfway between the lines of steps 20 (at 30) and 40 (at 50); an
  // evaluation of 4 s ends at 48, after it.
  const std::vector<Attempt> ledger = {line("3", 0, 0, 0, 60, Reason::kFailed, 30)};
  const std::vector<MetricsRecord> metrics = {started(1, 10, "0.0"), trained(20, 30),
                                              evaluated(40, 48, 4), trained(40, 50)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  // Span 10..50: eval 4, training 36 of which 40 - 50 less the eval's 4 s is lost (6 s).
  // A failed run's end is its end: idle 50..60.
  expect_parts(*g, 60, {0, 10, 30, 4, 0, 6, 0, 10});
}

TEST(Goodput, NothingCommittedLosesTheWholeStep) {
  const std::vector<Attempt> ledger = {line("3", 0, 0, 0, 40, Reason::kFailedRequeued, {}),
                                       line("3", 1, 0, 50, 90, Reason::kCompleted, 20)};
  const std::vector<MetricsRecord> metrics = {started(1, 5, "0.0"), trained(10, 30),
                                              started(1, 60, "1.0"), trained(20, 85)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  expect_parts(*g, 90, {10, 5, 25, 0, 0, 25, 20, 5});
}

TEST(Goodput, ChainOfJobsCountsTheNextJobsWaitAsQueue) {
  // Job 11 was refused the requeue; its supervisor submitted job 12 (restart counted on: 1),
  // which started 30 s after 11 ended.
  const std::vector<Attempt> ledger = {line("11", 0, 0, 10, 100, Reason::kChained, 80),
                                       line("12", 1, 0, 130, 200, Reason::kCompleted, 150)};
  const std::vector<MetricsRecord> metrics = {started(1, 20, "0.0"), trained(80, 95),
                                              started(81, 140, "1.0", 80), trained(150, 195)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  expect_parts(*g, 200, {40, 10, 130, 0, 0, 0, 15, 5});
}

// An attempt that ended at 100 with `reason`, and the next one, which Slurm started at 200: its
// worker trained from 210 and logged at 250; the status is asked at 300.
struct RunningCase {
  std::vector<Attempt> ledger;
  std::vector<MetricsRecord> metrics;
  GoodputClock clock;
};
RunningCase running_after(Reason reason) {
  RunningCase c;
  c.ledger = {line("7", 0, 0, 10, 100, reason, 90)};
  c.metrics = {started(1, 20, "0.0"), trained(90, 95), started(91, 210, "1.0", 90),
               trained(130, 250)};
  c.clock = ended_clock(0);
  c.clock.active = true;
  c.clock.now = kT + 300;
  c.clock.running_since = kT + 200;
  return c;
}

TEST(Goodput, RunningAttemptTrainsUntilNow) {
  const RunningCase c = running_after(Reason::kRequeued);
  const auto g = compute_goodput(c.ledger, c.metrics, c.clock);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->ongoing);
  // queue 10 + 100; start-up 10; training 75 + 90; recovery 95..100 and 200..210.
  expect_parts(*g, 300, {110, 10, 165, 0, 0, 0, 15, 0});
  ASSERT_EQ(g->steps.size(), 2u);
  EXPECT_FALSE(g->steps[1].reason);
  EXPECT_FALSE(g->steps[1].pending);
}

TEST(Goodput, AttemptRunningAfterATerminatedOneGoesOn) {
  // scontrol requeue: the script was terminated (a final reason), yet Slurm runs the job again.
  RunningCase c = running_after(Reason::kTerminated);
  const auto g = compute_goodput(c.ledger, c.metrics, c.clock);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->ongoing);
  expect_parts(*g, 300, {110, 10, 165, 0, 0, 0, 15, 0});
  // Without a later attempt in sight the terminated line ends the run, whatever Slurm says.
  c.clock.running_since.reset();
  const auto pending = compute_goodput(c.ledger, {c.metrics[0], c.metrics[1]}, c.clock);
  ASSERT_TRUE(pending);
  EXPECT_FALSE(pending->ongoing);
  EXPECT_NEAR(pending->wall_s, 100, 1e-3);
}

TEST(Goodput, AttemptStartedBeforeItsWorkerTrainsIsRecoveryUntilNow) {
  // Slurm started the requeued job at 200; its worker has written nothing yet at 230.
  RunningCase c = running_after(Reason::kNodeLostRequeued);
  c.clock.now = kT + 230;
  const auto g = compute_goodput(c.ledger, {c.metrics[0], c.metrics[1]}, c.clock);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->ongoing);
  // queue 10 + 100; start-up 10; training 75; recovery 95..100 and 200..230.
  expect_parts(*g, 230, {110, 10, 75, 0, 0, 0, 35, 0});
}

TEST(Goodput, PendingAfterARequeueIsQueueWaitUntilNow) {
  const std::vector<Attempt> ledger = {line("7", 0, 0, 10, 100, Reason::kRequeued, 90)};
  const std::vector<MetricsRecord> metrics = {started(1, 20, "0.0"), trained(90, 95)};
  GoodputClock clock = ended_clock(0);
  clock.active = true;
  clock.now = kT + 160;
  const auto g = compute_goodput(ledger, metrics, clock);
  ASSERT_TRUE(g);
  expect_parts(*g, 160, {70, 10, 75, 0, 0, 0, 5, 0});
  ASSERT_EQ(g->steps.size(), 2u);
  EXPECT_TRUE(g->steps[1].pending);
}

TEST(Goodput, FirstAttemptRunningWithoutSlurmsStartBeginsAtItsFirstStep) {
  const std::vector<MetricsRecord> metrics = {started(1, 30, "0.0"), trained(10, 50)};
  GoodputClock clock = ended_clock(0);
  clock.active = true;
  clock.now = kT + 60;
  const auto g = compute_goodput({}, metrics, clock);
  ASSERT_TRUE(g);
  expect_parts(*g, 60, {30, 0, 30, 0, 0, 0, 0, 0});
}

TEST(Goodput, UntaggedWorkersMatchTheirLineByTime) {
  const std::vector<Attempt> ledger = {line("7", 0, 0, 10, 90, Reason::kRequeued, 60),
                                       line("7", 1, 0, 150, 215, Reason::kCompleted, 100)};
  const std::vector<MetricsRecord> metrics = {started(1, 20, {}), trained(60, 80),
                                              started(61, 165, {}, 60), trained(100, 205)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  expect_parts(*g, 215, {70, 10, 100, 0, 0, 0, 25, 10});
}

MetricsRecord window(int64_t first_step, int64_t step, double at, double seconds) {
  records::TrainRecord r;
  r.step = step;
  r.window_first_step = first_step;
  r.window_seconds = seconds;
  r.wall_time = kT + at;
  return r;
}

TEST(Goodput, WorkersWithoutStartedLinesTrainFromTheirFirstWindow) {
  // The first window (steps 1..40) took 30 s up to 50: training from 20.
  const std::vector<Attempt> ledger = {line("7", 0, 0, 10, 90, Reason::kRequeued, 80),
                                       line("7", 1, 0, 100, 150, Reason::kCompleted, 120)};
  const std::vector<MetricsRecord> metrics = {window(1, 40, 50, 30), window(41, 80, 80, 30),
                                              window(81, 120, 140, 30)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  // queue 10 + 10; start-up 10..20; training 20..80, 110..140; recovery 80..90, 100..110;
  // idle 140..150.
  expect_parts(*g, 150, {20, 10, 90, 0, 0, 0, 20, 10});
}

TEST(Goodput, AttemptThatNeverTrainedIsStartupThenRecoveryOrIdle) {
  // A setup failure before any training, then a run that trained, then an attempt that found the
  // run finished and ended at once.
  const std::vector<Attempt> ledger = {line("7", 0, 0, 10, 20, Reason::kFailedRequeued, {}),
                                       line("7", 1, 0, 30, 100, Reason::kRequeued, 80),
                                       line("7", 2, 0, 110, 115, Reason::kCompleted, 80)};
  const std::vector<MetricsRecord> metrics = {started(1, 40, "1.0"), trained(80, 90)};
  const auto g = compute_goodput(ledger, metrics, ended_clock(0));
  ASSERT_TRUE(g);
  // queue 10 + 10 + 10; start-up 10..20 and 30..40; training 40..90; recovery 90..100; idle 5.
  expect_parts(*g, 115, {30, 20, 50, 0, 0, 0, 10, 5});
}

TEST(Goodput, NothingToAccount) { EXPECT_FALSE(compute_goodput({}, {}, ended_clock(0))); }

}  // namespace
}  // namespace hpctrain::run::goodput_test
