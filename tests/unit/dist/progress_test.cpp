// dist/progress.hpp: what a rank publishes for the hang watchdog, and the planted stalls.
#include "dist/progress.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace hpctrain::progress {
namespace {

TEST(Progress, EveryPhaseChangeMovesTheCounterAndTheLineRoundTrips) {
  const Snapshot before = snapshot();
  set_step(41);
  enter(Phase::kAllReduce, 3);
  const Snapshot s = snapshot();
  EXPECT_EQ(s.counter, before.counter + 1);
  EXPECT_EQ(s.step, 41);
  EXPECT_EQ(s.phase, Phase::kAllReduce);
  EXPECT_EQ(s.detail, 3);
  tick();
  EXPECT_EQ(snapshot().counter, s.counter + 1);
  EXPECT_EQ(snapshot().phase, Phase::kAllReduce);  // a tick is progress inside the phase

  const auto back = parse(encode(s));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->counter, s.counter);
  EXPECT_EQ(back->step, 41);
  EXPECT_EQ(back->phase, Phase::kAllReduce);
  EXPECT_EQ(back->detail, 3);
  EXPECT_FALSE(parse("").has_value());
  EXPECT_EQ(back->first, s.first);
  begin_training(40);
  EXPECT_EQ(parse(encode(snapshot()))->first, 40);
  EXPECT_FALSE(parse("1 2 99 -1 0").has_value());  // no such phase
  EXPECT_FALSE(parse("1 2 three").has_value());
}

// The heartbeat's thread reads the progress while the training thread writes it: each snapshot it
// takes is whole (a phase that exists, a step the trainer set), and the counter it sees never
// goes back. Also the ThreadSanitizer pass's test of this seam (scripts/test.sh).
TEST(Progress, AnotherThreadReadsWhatTheTrainingThreadWrites) {
  const uint64_t start = snapshot().counter;
  constexpr int kSteps = 2000;
  std::atomic<bool> done{false};
  std::thread beat([&] {
    uint64_t last = start;
    while (!done.load()) {
      const Snapshot s = snapshot();
      EXPECT_GE(s.counter, last);
      EXPECT_TRUE(parse(encode(s)).has_value()) << encode(s);
      EXPECT_GE(s.step, 0);
      EXPECT_LE(s.step, 1000 + kSteps);
      last = s.counter;
    }
  });
  for (int step = 1000; step < 1000 + kSteps; ++step) {
    set_step(step);
    enter(Phase::kForward);
    enter(Phase::kAllReduce, step % 4);
    tick();
    enter(Phase::kStepEnd);
  }
  done.store(true);
  beat.join();
  EXPECT_EQ(snapshot().counter, start + 4 * kSteps);
  EXPECT_EQ(snapshot().step, 1000 + kSteps - 1);
}

TEST(Progress, PhasesAreNamedAndOrderedAsAStepGoesThroughThem) {
  EXPECT_EQ(phase_name(Phase::kAllReduce, 3), "all-reduce bucket 3");
  EXPECT_EQ(phase_name(Phase::kDataWait), "data wait");
  EXPECT_EQ(phase_name(Phase::kStepEnd), "end of step");
  // While `step` steps are complete: the work after a step, then the next step's phases.
  EXPECT_LT(Phase::kStepEnd, Phase::kCheckpoint);
  EXPECT_LT(Phase::kEval, Phase::kDataWait);
  EXPECT_LT(Phase::kDataWait, Phase::kForward);
  EXPECT_LT(Phase::kBackward, Phase::kAllReduce);
  EXPECT_LT(Phase::kAllReduce, Phase::kAgreement);
}

TEST(Progress, APlantedStallSleepsOnceAtItsStepAndPhaseAndABadOneIsRefusedByName) {
  EXPECT_THROW(plant_stall("1:5:sleepy:3", 1), std::invalid_argument);
  EXPECT_THROW(plant_stall("1:5:data", 1), std::invalid_argument);
  EXPECT_THROW(plant_stall("1:5:data:0", 1), std::invalid_argument);
  try {
    plant_stall("x", 0);
    ADD_FAILURE() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("RANK:STEP:PHASE:SECONDS"), std::string::npos);
  }
  plant_stall("0:7:forward:0.3", /*this_rank=*/1);  // another rank's: nothing happens here
  set_step(7);
  auto t0 = std::chrono::steady_clock::now();
  enter(Phase::kForward);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));

  plant_stall("1:7:forward:0.3", /*this_rank=*/1);
  set_step(6);
  enter(Phase::kForward);  // another step
  set_step(7);
  enter(Phase::kBackward);  // another phase
  t0 = std::chrono::steady_clock::now();
  enter(Phase::kForward);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  t0 = std::chrono::steady_clock::now();
  enter(Phase::kForward);  // once only
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
}

TEST(Progress, AStallPlantedOnAHostSleepsEveryRankOfThatHostOnlyFromItsStep) {
  EXPECT_THROW(plant_stall("@:every:data:0.1", 0, "node1"), std::invalid_argument);
  EXPECT_THROW(plant_stall("@node1", 0, "node1"), std::invalid_argument);
  plant_stall("@node2:every:data:0.2", /*this_rank=*/3, "node1");  // another host's
  set_step(3);
  auto t0 = std::chrono::steady_clock::now();
  enter(Phase::kDataWait);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));

  plant_stall("@node1:every:data:0.2", /*this_rank=*/3, "node1");
  for (int step = 4; step < 6; ++step) {  // every step
    set_step(step);
    t0 = std::chrono::steady_clock::now();
    enter(Phase::kDataWait);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  }
  // "N+": every step from N on.
  plant_stall("@node1:9+:data:0.2", /*this_rank=*/3, "node1");
  set_step(8);
  t0 = std::chrono::steady_clock::now();
  enter(Phase::kDataWait);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  for (int step = 9; step < 11; ++step) {
    set_step(step);
    t0 = std::chrono::steady_clock::now();
    enter(Phase::kDataWait);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  }
  EXPECT_THROW(plant_stall("@node1:x+:data:0.2", 3, "node1"), std::invalid_argument);
  plant_stall("@node2:every:data:0.2", 3, "node1");  // replaces it: none in this process
}

// "eval-batch": a long evaluation, slowed before each batch, not on entering the phase.
TEST(Progress, AStallPlantedOnEvalBatchesSleepsBeforeEachBatch) {
  plant_stall("@node1:every:eval-batch:0.3", /*this_rank=*/0, "node1");
  set_step(12);
  auto t0 = std::chrono::steady_clock::now();
  enter(Phase::kEval);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  for (int batch = 0; batch < 2; ++batch) {
    t0 = std::chrono::steady_clock::now();
    batch_begins(Phase::kEval);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  }
  plant_stall("@node1:every:eval:0.3", 0, "node1");  // on entering the phase: not per batch
  t0 = std::chrono::steady_clock::now();
  batch_begins(Phase::kEval);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
  plant_stall("@node2:every:data:0.2", 0, "node1");  // none in this process
}

}  // namespace
}  // namespace hpctrain::progress
