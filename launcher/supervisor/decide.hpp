// The step supervisor's decisions (docs/resilience.md, docs/preemption.md), as pure functions of
// the ledger, the allocation and what the step left behind: which nodes a step trains on, whether
// a job attempt is requeued, counted as failed or stopped by the no-progress breaker, which nodes
// it excludes. The supervisor (supervisor.hpp) gathers the facts and carries the decisions out.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/records.hpp"
#include "spec/spec.hpp"

namespace hpctrain::supervisor {

using Nodes = std::vector<std::string>;

// What the supervisor needs of the spec, with the exit statuses of the protocol.
struct Knobs {
  bool requeue_enabled = false;
  int64_t max_restarts = 0, max_failures = 0, max_no_progress = 0;
  int64_t train_nodes = 1, tasks_per_node = 1;
  spec::OnNodeLoss policy = spec::OnNodeLoss::kRequeue;
  int64_t max_node_losses = 0, heartbeat_timeout_s = 10, hang_grace_s = 90;
  bool chain = false;  // submit the next job of a chain where requeue is refused
  // The causes that stop the run at once, never retried (resilience.stop_on).
  std::vector<records::Cause> stop_on = {records::Cause::kBadInput, records::Cause::kDiverged,
                                         records::Cause::kOom};
  int64_t batch_size = 0;  // per rank, for the advice an out-of-memory stop gives
};
Knobs knobs_from_spec(const spec::Spec& spec);

// Failed attempts at the end of the ledger (reason failed or failed_requeued): the ones that count
// against preemption.max_consecutive_failures. Any other line ends the chain.
int64_t consecutive_failures(const std::vector<records::Attempt>& ledger);

// Attempts in a row, the one ending now included, that ended without a new committed checkpoint
// (`newest` is the newest now): a line made progress when its last_step differs from the one
// before it; the first attempt made progress when it left a checkpoint at all.
int64_t attempts_without_progress(const std::vector<records::Attempt>& ledger,
                                  std::optional<int64_t> newest);

// The nodes lost, hung or evicted in earlier attempts of job `job_id` (the ledger's lost_nodes),
// in order, each once.
Nodes earlier_lost(const std::vector<records::Attempt>& ledger, const std::string& job_id);

// The nodes a step trains on: at most `want`, first those of `current` not lost, then the
// allocation's in order, the batch host last (losing it ends the job: it is the spare used last).
Nodes choose_nodes(const Nodes& current, const Nodes& allocation, const Nodes& lost,
                   const std::string& batch_host, int64_t want);

// Nodes lost in earlier attempts that Slurm placed this attempt on again: kept out (`avoided`,
// added to the lost nodes) while enough others are left for the step (with shrink: any), else
// used; `message` says which, empty when none of them is in the allocation.
struct Avoidance {
  Nodes avoided;
  std::string message;
  bool to_stderr = false;
};
Avoidance avoid_earlier(const Nodes& allocation, const Nodes& earlier, const Knobs& knobs);

// After a node loss: whether the run goes on in this allocation on `chosen` (the nodes left),
// the `losses`-th loss of this attempt.
bool recovers(const Knobs& knobs, int64_t losses, size_t chosen);

// How a job attempt ended: the ledger's reason.
struct Ending {
  bool terminated = false;  // TERM came (scancel, time limit) or the job is no longer RUNNING
  bool node_lost = false;   // a node was lost and the run could not go on in the allocation
  int status = 0;           // the step's exit status
  int64_t restart = 0;      // SLURM_RESTART_COUNT
  int64_t failures = 0;     // consecutive_failures of the ledger before this attempt
  std::optional<int64_t> stalled;       // attempts_without_progress, once known
  std::optional<records::Cause> cause;  // the classifier's (supervisor/causes.hpp)
};
// The reason, from the cause where there is one: a cause of knobs.stop_on ends the run (failed)
// however many retries are left; a step that exited 0 without rank 0's end of training (cause
// unknown) is a failure, not completed.
records::Reason end_reason(const Knobs& knobs, const Ending& ending);
// Whether `cause` is one of knobs.stop_on: the run stops rather than retry.
bool stops_run(const Knobs& knobs, records::Cause cause);

// Whether the job's ExcNodeList may take `excluded` nodes: not when the partition (`total` nodes)
// would be left with fewer than the job needs (it would pend forever).
bool exclusion_fits(int64_t total, size_t excluded, int64_t need);

// The verdicts the workers leave in metrics.jsonl for a step (its tag "RESTART.STEP").
struct Verdict {
  records::MetricsKind kind = records::MetricsKind::kHang;  // kHang or kEvict
  Nodes hosts;                                              // those that are node names
  double wall_time = 0;                                     // 0 when the record has none
  std::string message;                                      // at most 240 characters
};
// The last hang or evict record of step `tag` among `records`.
std::optional<Verdict> find_verdict(const std::vector<records::MetricsRecord>& records,
                                    const std::string& tag);
// The node among `nodes` (Slurm's names) that a worker's host name stands for. Workers name their
// host as gethostname(2) does, fully qualified on some sites where Slurm's node names are short
// (or the other way round): the node of that very name, else the one node whose name has the
// host's short name (before the first '.'); none when no node or several do. An address
// (digits and dots) matches only itself.
std::optional<std::string> node_of_host(const std::string& host, const Nodes& nodes);
// The host a worker's line of output was written on: the worker's own prefix ("[rank 2/8 n7] ...",
// "[n7] ..."), NCCL's ("n7:1234:1290 [0] NCCL WARN ..."); nullopt when the line has neither.
std::optional<std::string> host_of_line(std::string_view line);
// The step's node whose GPU failed, from the step's output: the host of the last line the
// classifier takes for GPU hardware (causes.hpp) that names one, as one of `nodes`
// (node_of_host); with the line.
struct FaultyNode {
  std::string node, line;
};
std::optional<FaultyNode> gpu_fault(const std::vector<std::string>& lines, const Nodes& nodes);
// The wall time of step `tag`'s "started" record (its first training step): the last such record,
// nullopt when it has no wall time.
std::optional<double> find_started(const std::vector<records::MetricsRecord>& records,
                                   const std::string& tag);

// A node name as Slurm prints it, safe to pass on: letters, digits, '.', '_', '-'.
bool is_node_name(const std::string& name);
// "a,b,c".
std::string join(const Nodes& nodes);
bool contains(const Nodes& nodes, const std::string& node);

}  // namespace hpctrain::supervisor
