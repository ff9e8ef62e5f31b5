// Where this rank's training stands, for the hang watchdog (dist/hang_watchdog.hpp,
// docs/resilience.md "Hangs"): the step, the phase of it and a counter that moves on every phase
// change (and every evaluation batch). The training thread writes it with a few relaxed atomic
// stores; the heartbeat thread reads it once a second and publishes it in the store, where rank
// 0 compares the ranks and names the ones the others wait for.
//
// Phases are listed in the order a step goes through them, those after a step (checkpoint,
// evaluation) first: while `step` steps are complete, a rank in a later phase is further along.
//
// Tests plant a stall (HPCTRAIN_TEST_STALL=RANK:STEP:PHASE:SECONDS, read by the worker): the
// rank sleeps when it enters PHASE at STEP, as a stuck filesystem, loader or collective would;
// with STEP "every", each time it enters PHASE (a slow rank: a straggler).
// Thread safety: enter() and set_step() from the training thread, tick() from any; snapshot()
// from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hpctrain::progress {

enum class Phase : int {
  kStarting = 0,  // before the first step: joining, loading, restoring
  kStepEnd,       // step `step` just completed: logging, acting on the agreement
  kCheckpoint,    // saving (after step `step`)
  kEval,          // evaluating (after step `step`)
  kDataWait,      // waiting for the next batch
  kForward,
  kBackward,   // backward, with the gradient all-reduce overlapping it
  kAllReduce,  // waiting for gradient bucket `detail`
  kAgreement,  // the per-step agreement all-reduce and the optimizer step
  kAverage,    // local SGD: averaging the models
  kFinishing,  // after the last step: the final averaging, evaluation, weights
};
constexpr int kPhases = 11;

// "data wait", "all-reduce bucket 3", ...
std::string phase_name(Phase phase, int detail = -1);

// This rank enters `phase` (detail: the bucket of kAllReduce, else -1).
void enter(Phase phase, int detail = -1);
// The steps completed; call as the counter moves.
void set_step(int64_t step);
// Training begins (or resumes) at `step` in this process: its first step is the one after it.
void begin_training(int64_t step);
// Progress inside a long phase (an evaluation batch): the counter moves, the phase stays.
void tick();
// A batch of `phase` (kEval) begins: where a stall planted on "eval-batch" sleeps (tests: a long
// evaluation); nothing else. The counter does not move here.
void batch_begins(Phase phase);

struct Snapshot {
  int64_t step = 0;
  Phase phase = Phase::kStarting;
  int detail = -1;
  uint64_t counter = 0;  // phase changes and ticks so far
  int64_t first = -1;    // the step training began at in this process (-1: not yet)
};
Snapshot snapshot();

// One line for the store: "COUNTER STEP PHASE DETAIL FIRST"; parse() reads it back (nullopt:
// garbled).
std::string encode(const Snapshot& s);
std::optional<Snapshot> parse(const std::string& text);

// Tests: rank RANK (or "@HOST": every rank on that host) sleeps SECONDS when it enters PHASE at
// step STEP (every time: "every"; every time from step N on: "N+"). Throws std::invalid_argument
// naming what is wrong in "RANK:STEP:PHASE:SECONDS" (PHASE one of data, forward, backward,
// allreduce, agreement, checkpoint, eval; or eval-batch: before each evaluation batch).
void plant_stall(const std::string& spec, int this_rank, const std::string& this_host = "");

}  // namespace hpctrain::progress
