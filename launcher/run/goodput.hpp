// The goodput ledger: a run's wall time (and its node-hours, GPU-hours where the job has GPUs)
// split into where it went: queue wait, start-up, productive training, evaluation, checkpoint
// stalls, work lost, detection and recovery, idle at the end. Computed from the records the run
// directory already holds (attempts.jsonl's start and end of each srun step; metrics.jsonl's
// started, train and eval lines with their wall_time; the submission's time) and Slurm's start of
// an attempt still running: no clock of its own. The parts tile the run's wall time, so they sum
// to it. docs/run-directory.md ("Goodput") says how each part is derived; goodput.cpp says it
// again where it is done.
// Thread safety: pure functions over values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/records.hpp"

namespace hpctrain::run {

// Where a second of the run went; the parts tile the wall time.
enum class GoodputPart {
  kQueueWait,        // the job pending in Slurm: submit -> start, and requeue -> next start
  kStartup,          // the first attempt's start -> the run's first training step
  kTraining,         // productive training: steps computed and kept
  kEvaluation,       // the validation passes
  kCheckpointStall,  // the training loop blocked saving checkpoints
  kWorkLost,         // steps computed after the last committed checkpoint of a step that ended
  kRecovery,         // detection and recovery: an ended step's last progress -> the next's first
  kIdleEnd,          // the run's last progress -> the end of its last attempt
};
inline constexpr size_t kGoodputParts = 8;

// The JSON keys of the parts, in the enum's order ("queue_wait_s", ...), and short words for the
// status line ("queue", ...).
std::string_view goodput_key(GoodputPart part);
std::string_view goodput_word(GoodputPart part);

struct GoodputParts {
  std::array<double, kGoodputParts> seconds{};
  double& operator[](GoodputPart p) { return seconds[static_cast<size_t>(p)]; }
  double operator[](GoodputPart p) const { return seconds[static_cast<size_t>(p)]; }
  double total() const;
};

// One srun step's share (a ledger line, or the attempt running now): the time before it (queue
// wait or recovery since the step before) and its own.
struct GoodputStep {
  std::string job_id;  // empty for an attempt running now that has no ledger line yet
  int64_t restart = 0;
  int64_t srun_step = 0;
  std::optional<records::Reason> reason;  // nullopt: still running, or pending
  // The job waiting in Slurm for its next attempt (the run goes on): queue wait alone.
  bool pending = false;
  GoodputParts parts;
};

// What goodput reads besides the records: Slurm's word and the spec's allocation.
struct GoodputClock {
  std::optional<double> submitted;  // Unix time of the submission that began the run's chain
  // Slurm has a job of the run pending or running (not yet ended): the parts run until `now`.
  bool active = false;
  double now = 0;
  // Slurm's start of the attempt running now, which has no ledger line yet.
  std::optional<double> running_since;
  int64_t nodes = 0;          // nodes allocated per job (job.nodes + resilience.spare_nodes)
  int64_t gpus_per_node = 0;  // 0: a CPU job, no GPU-hours
};

struct Goodput {
  double begin = 0, end = 0;  // Unix times the wall time runs between
  double wall_s = 0;
  GoodputParts parts;
  // Training over wall time, in [0, 1]; 0 for no wall time.
  double fraction() const { return wall_s > 0 ? parts[GoodputPart::kTraining] / wall_s : 0; }
  // Nodes (GPUs) times each part's seconds, in hours; queue wait holds no allocation.
  int64_t nodes = 0, gpus_per_node = 0;
  double node_hours(GoodputPart p) const;
  double node_hours() const;
  bool ongoing = false;  // the run has not ended: `end` is the clock's `now`
  std::vector<GoodputStep> steps;
};

// The ledger of `attempts` and `metrics` (metrics.jsonl's records, in file order). The run has
// ended when the ledger's last line is final (records::is_final), whatever Slurm says. nullopt
// when there is nothing to account: no ledger line with its times, no attempt running and no
// submission of a job still pending.
std::optional<Goodput> compute_goodput(const std::vector<records::Attempt>& attempts,
                                       const std::vector<records::MetricsRecord>& metrics,
                                       const GoodputClock& clock);

}  // namespace hpctrain::run
