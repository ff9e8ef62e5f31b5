// The run directory's records, owned here for every program that writes or reads them: the lines
// of metrics.jsonl (six kinds, written by the worker's rank 0), of attempts.jsonl (the ledger,
// written by the step supervisor) and of submissions.jsonl (submit, and a chain's next job).
// docs/run-directory.md documents every field; run_layout.hpp names the files. Each record has a
// typed struct, one writer (its JSON line: the bytes hpctrain has always written) and one reader
// (a line that is not such a record is skipped and counted), and each enumerated value (a metrics
// kind, a ledger reason, a node-loss cause) has one name table. The report's page takes the field
// names from here too (field_names()).
// Thread safety: pure functions; the file readers and appenders are reentrant; one MetricsLog is
// written from one thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/unique_fd.hpp"

namespace hpctrain::records {

namespace fs = std::filesystem;

// ---- Names: one table per enumeration; name_of, parse and all read it.

// The kinds of metrics.jsonl's lines (its "kind" field).
enum class MetricsKind { kTrain, kEval, kRanks, kStarted, kHang, kEvict, kRollback, kCorrupt };
// Why a ledger line's srun step ended (attempts.jsonl's "reason"). Each reason the job is requeued
// for has a chained twin: the same end, where Slurm refused the requeue and the next job of a
// chain continues the run instead.
enum class Reason {
  kCompleted,
  kRequeued,
  kRestartLimit,
  kFailedRequeued,
  kFailed,
  kTerminated,
  kSetupFailed,
  kNoProgress,
  kNodeLost,
  kNodeLostRequeued,
  kChained,
  kFailedChained,
  kNodeLostChained,
};
// Why a step ended (attempts.jsonl's "cause"), as the step supervisor's classifier found it from
// the exit status, Slurm's word and the step's last lines (supervisor/causes.hpp; the table in
// docs/resilience.md). The ledger's reason says what was done about it.
enum class Cause {
  kCompleted,
  kPreempted,
  kTimeLimit,
  kCancelled,
  kNodeLost,
  kHang,
  kStraggler,
  kOom,
  kFilesystem,
  kNetwork,
  kGpuHardware,
  kBadInput,
  kDiverged,
  kUnknown,
};
// How a node loss was found (attempts.jsonl's "loss_kind"; "cause" on ledgers older than causes):
// its slurmd did not answer (silent) or refused the probe, the hang watchdog named its ranks, it
// was evicted as a straggler, a worker's line said its GPU failed, or the replay on divergence
// found it computing wrong results (corruption).
enum class LossCause { kSilent, kRefused, kHang, kStraggler, kGpuHardware, kCorruption };

template <typename E>
struct Names;
template <>
struct Names<MetricsKind> {
  static constexpr std::array<std::string_view, 8> kValues = {
      "train", "eval", "ranks", "started", "hang", "evict", "rollback", "corrupt"};
};
template <>
struct Names<Reason> {
  static constexpr std::array<std::string_view, 13> kValues = {
      "completed",  "requeued",       "restart_limit",    "failed_requeued", "failed",
      "terminated", "setup_failed",   "no_progress",      "node_lost",       "node_lost_requeued",
      "chained",    "failed_chained", "node_lost_chained"};
};
template <>
struct Names<Cause> {
  static constexpr std::array<std::string_view, 14> kValues = {
      "completed", "preempted",  "time_limit", "cancelled",    "node_lost", "hang",     "straggler",
      "oom",       "filesystem", "network",    "gpu_hardware", "bad_input", "diverged", "unknown"};
};
template <>
struct Names<LossCause> {
  static constexpr std::array<std::string_view, 6> kValues = {
      "silent", "refused", "hang", "straggler", "gpu_hardware", "corruption"};
};

template <typename E>
constexpr std::string_view name_of(E value) {
  return Names<E>::kValues[static_cast<size_t>(value)];
}

// The enumerator named `name`, or nullopt.
template <typename E>
constexpr std::optional<E> parse(std::string_view name) {
  for (size_t i = 0; i < Names<E>::kValues.size(); ++i) {
    if (Names<E>::kValues[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

// Every enumerator, in the table's order.
template <typename E>
constexpr std::array<E, Names<E>::kValues.size()> all() {
  std::array<E, Names<E>::kValues.size()> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<E>(i);
  return out;
}

// What a reason means (docs/run-directory.md). The job is requeued after the line: requeued,
// failed_requeued, node_lost_requeued.
bool is_requeue(Reason reason);
// The next job of a chain continues the run after the line (Slurm refused the requeue): chained,
// failed_chained, node_lost_chained.
bool is_chain(Reason reason);
// The chained twin of a requeue reason (requeued: chained, ...); any other reason itself.
Reason chained(Reason reason);
// A node was lost: node_lost, node_lost_requeued, node_lost_chained.
bool is_node_loss(Reason reason);
// A failure that counts against preemption.max_consecutive_failures: failed, failed_requeued,
// failed_chained.
bool is_failure(Reason reason);
// The run has ended for good, no attempt can follow: completed, failed, restart_limit,
// no_progress, setup_failed, terminated.
bool is_final(Reason reason);

// ---- Field names, as the files spell them: the writers and readers here, the launcher's JSON
// for status and the report (and, through field_names(), the report's page) use these.
namespace field {
// metrics.jsonl, every kind
inline constexpr const char* kKind = "kind";
inline constexpr const char* kStep = "step";  // also the ledger's srun step
inline constexpr const char* kEpoch = "epoch";
inline constexpr const char* kWallTime = "wall_time";
// train, eval
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kLr = "lr";
inline constexpr const char* kImagesPerS = "images_per_s";
inline constexpr const char* kWindowFirstStep = "window_first_step";
inline constexpr const char* kWindowSeconds = "window_seconds";
inline constexpr const char* kLossScale = "loss_scale";
inline constexpr const char* kCheckpointSeconds = "checkpoint_seconds";
inline constexpr const char* kTop1 = "top1";
inline constexpr const char* kTop5 = "top5";
inline constexpr const char* kSamples = "samples";
inline constexpr const char* kSeconds = "seconds";
// ranks
inline constexpr const char* kBusyP50 = "busy_p50_s";
inline constexpr const char* kBusyP95 = "busy_p95_s";
inline constexpr const char* kSlowestRank = "slowest_rank";
inline constexpr const char* kSlowestHost = "slowest_host";
inline constexpr const char* kMedianBusy = "median_busy_s";
inline constexpr const char* kSlowestBusy = "slowest_busy_s";
inline constexpr const char* kBehindRank = "behind_rank";
// started, hang, evict
inline constexpr const char* kWorldSize = "world_size";  // also the ledger's
inline constexpr const char* kResumedFrom = "resumed_from";
inline constexpr const char* kTag = "tag";
inline constexpr const char* kVersion = "version";
inline constexpr const char* kRanks = "ranks";
inline constexpr const char* kHosts = "hosts";
inline constexpr const char* kMessage = "message";
// rollback
inline constexpr const char* kRolledBackTo = "rolled_back_to";
inline constexpr const char* kSkippedFrom = "skipped_from";
inline constexpr const char* kSamplesSkipped = "samples_skipped";
inline constexpr const char* kRollbacks = "rollbacks";
// attempts.jsonl
inline constexpr const char* kJobId = "job_id";  // also submissions.jsonl's
inline constexpr const char* kArrayTaskId = "array_task_id";
inline constexpr const char* kRestart = "restart";
inline constexpr const char* kNodes = "nodes";
inline constexpr const char* kStart = "start";
inline constexpr const char* kEnd = "end";
inline constexpr const char* kExitStatus = "exit_status";
inline constexpr const char* kReason = "reason";
inline constexpr const char* kLastStep = "last_step";
inline constexpr const char* kLostNodes = "lost_nodes";
inline constexpr const char* kAddedNodes = "added_nodes";
inline constexpr const char* kCause = "cause";
inline constexpr const char* kEvidence = "evidence";
inline constexpr const char* kLossKind = "loss_kind";
inline constexpr const char* kDetected = "detected";
inline constexpr const char* kDetectedBy = "detected_by";
inline constexpr const char* kStopS = "stop_s";
inline constexpr const char* kRecoverS = "recover_s";
inline constexpr const char* kExcluded = "excluded";
inline constexpr const char* kAvoided = "avoided";
// submissions.jsonl
inline constexpr const char* kSubmittedAt = "submitted_at";
inline constexpr const char* kArrayTasks = "array_tasks";
inline constexpr const char* kChainedFrom = "chained_from";
}  // namespace field

// ---- metrics.jsonl: one record a line, every kind with its integer "step".
//
// A field a line lacks reads as absent (nullopt, an empty string or list), so that lines of older
// workers read; absent fields are not written. The worker writes a NaN or infinite number as null,
// which reads back as NaN (not finite), and a NaN is written as null again.

// Every train.log_every_steps steps and at the last step: the log window's training figures.
struct TrainRecord {
  int64_t step = 0;                          // optimizer steps completed
  std::optional<int64_t> epoch;              // from 1
  std::optional<double> loss;                // mean over the window and the ranks
  std::optional<double> lr;                  // the last step's learning rate
  std::optional<double> images_per_s;        // all ranks, evaluations excluded
  std::optional<int64_t> window_first_step;  // the window: window_first_step..step
  std::optional<double> window_seconds;
  std::optional<double> loss_scale;  // 1 when not training in fp16
  // Seconds the training loop spent blocked in checkpoint saves since the previous train line
  // (the goodput ledger's checkpoint stalls); absent from workers before it.
  std::optional<double> checkpoint_seconds;
  std::optional<double> wall_time;  // Unix time
};

// After every train.eval_every_epochs epochs and at the end.
struct EvalRecord {
  int64_t step = 0;
  std::optional<int64_t> epoch;
  std::optional<double> loss;  // cross-entropy over the validation set
  std::optional<double> top1;  // in [0, 1]
  std::optional<double> top5;
  std::optional<int64_t> samples;  // validation samples counted, over all ranks
  std::optional<double> seconds;   // how long the evaluation took
  std::optional<double> wall_time;
};

// Before each train line with more than one rank: every rank's busy time per step.
struct RanksRecord {
  int64_t step = 0;
  std::vector<double> busy_p50_s;  // by rank
  std::vector<double> busy_p95_s;
  std::optional<int64_t> slowest_rank;
  std::optional<std::string> slowest_host;  // written as null when the hosts are unknown
  std::optional<double> median_busy_s;
  std::optional<double> slowest_busy_s;
  std::optional<int64_t> behind_rank;  // the worker's verdict: the slowest rank is clearly behind
  std::optional<double> wall_time;
};

// The first training step of each worker process.
struct StartedRecord {
  int64_t step = 0;
  std::optional<int64_t> epoch;
  std::optional<int64_t> world_size;
  std::optional<int64_t> resumed_from;  // the checkpoint's step; written as null on a fresh start
  std::optional<std::string> tag;       // the srun step's "RESTART.STEP"; absent outside one
  // The worker's version and commit ("0.1.0+1a2b3c4d5e6f"); absent from workers before it.
  std::optional<std::string> version;
  std::optional<double> wall_time;
};

// A "hang" (the hang watchdog's verdict), "evict" (a straggler's node let go) or "corrupt" (the
// replay on divergence found a node computing wrong results) line: the ranks and hosts the step
// supervisor is to treat as lost.
struct SuspectsRecord {
  MetricsKind kind = MetricsKind::kHang;  // kHang, kEvict or kCorrupt
  std::string tag;                        // the srun step's "RESTART.STEP"
  int64_t step = 0;
  std::vector<int64_t> ranks;
  std::vector<std::string> hosts;  // the ranks' hosts as gethostname gives them, each once
  std::string message;
  std::optional<double> wall_time;
};

// A "rollback" line: the divergence guard found the loss diverged and the run rolled back to a
// checkpoint, skipping the samples of the steps since (docs/resilience.md).
struct RollbackRecord {
  int64_t step = 0;                        // the last offending step: training goes on after it
  std::optional<int64_t> rolled_back_to;   // the checkpoint's step
  std::optional<int64_t> skipped_from;     // the first step skipped (rolled_back_to + 1)
  std::optional<int64_t> samples_skipped;  // all ranks' together
  std::optional<int64_t> rollbacks;        // the run's, this one included
  std::string message;                     // the verdict
  std::optional<double> wall_time;
};

using MetricsRecord = std::variant<TrainRecord, EvalRecord, RanksRecord, StartedRecord,
                                   SuspectsRecord, RollbackRecord>;

MetricsKind kind_of(const MetricsRecord& record);

// The distinct hosts of `ranks` (rank r's host is rank_hosts[r]; unknown ones left out), in
// order: a suspects record's hosts.
std::vector<std::string> hosts_of_ranks(const std::vector<int64_t>& ranks,
                                        const std::vector<std::string>& rank_hosts);

// The record as a JSON object (keys sorted, as nlohmann::json keeps them) and as the line written,
// without its newline. Throws std::invalid_argument for a suspects record of another kind.
nlohmann::json to_json(const MetricsRecord& record);
std::string to_line(const MetricsRecord& record);

// What one line of metrics.jsonl holds.
enum class LineStatus {
  kRecord,       // a record of a kind this version knows
  kUnknownKind,  // a record (an object with a string kind and an integer step) of another kind
  kMalformed,    // anything else: not JSON, not an object, no string kind or integer step
};
// The record on `line`, or nullopt with `status` saying why not.
std::optional<MetricsRecord> parse_metrics_line(std::string_view line,
                                                LineStatus* status = nullptr);

// What a reader found in metrics.jsonl (or its tail): the records in file order (a resumed run's
// repeated steps kept, in the order written), the malformed lines skipped, and the last complete
// line as written, whatever it holds. Only complete lines count: one still being written has no
// newline yet.
struct MetricsRead {
  std::vector<MetricsRecord> records;
  size_t malformed = 0;
  std::optional<std::string> last_line;
};
// The whole of RUN_DIR/metrics.jsonl: one open, one read. A missing file reads as empty.
MetricsRead read_metrics(const fs::path& run_dir);
// The complete lines of its last `bytes` (the first one, cut, skipped): what the step supervisor
// polls while a step runs.
inline constexpr size_t kMetricsTailBytes = 65536;
MetricsRead read_metrics_tail(const fs::path& run_dir, size_t bytes = kMetricsTailBytes);

// The last record of `kind` (hang and evict are both SuspectsRecord), or nullptr.
template <typename R>
const R* last_of(const std::vector<MetricsRecord>& records) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (const R* r = std::get_if<R>(&*it)) return r;
  }
  return nullptr;
}

// metrics.jsonl opened for appending: each record goes out in one write(2) of a whole line, so a
// reader never sees half a record from a live run and a crash loses at most the line being
// written.
class MetricsLog {
 public:
  // Opens (creating) `path` for appending; throws rt::Error naming it.
  explicit MetricsLog(const fs::path& path);
  // Appends `record` as one line; throws rt::Error.
  void write(const MetricsRecord& record);
  const fs::path& path() const { return path_; }

 protected:
  // Appends `line` (without its newline) in one write(2).
  void write_line(const std::string& line);

 private:
  fs::path path_;
  UniqueFd fd_;
};

// Appends one record to RUN_DIR/metrics.jsonl (opened and closed again): for the few records
// written outside a trainer's MetricsLog (the hang watchdog's). Throws rt::Error.
void append_metrics(const fs::path& run_dir, const MetricsRecord& record);

// ---- attempts.jsonl: one line per srun step of a job attempt.

struct Attempt {
  std::string job_id;  // the job, or ARRAYID_TASK
  std::optional<int64_t> array_task_id;
  int64_t restart = 0;  // SLURM_RESTART_COUNT
  std::string nodes;    // SLURM_JOB_NODELIST
  std::string start, end;
  int64_t exit_status = 0;
  Reason reason = Reason::kCompleted;
  // Why the step ended, and the line (or, for unknown, the last lines) that decided; absent on
  // lines older than causes.
  std::optional<Cause> cause;
  std::string evidence;
  std::optional<int64_t> last_step;  // the newest committed checkpoint
  // The srun step within the job attempt ("step" in the file); 0 on lines that predate steps.
  int64_t srun_step = 0;
  std::optional<int64_t> world_size;
  // Set on node-loss lines: node names as written (comma-separated); added_nodes is empty when
  // the world shrank instead.
  std::string lost_nodes, added_nodes;
  std::optional<LossCause> loss;
  std::string detected, detected_by;  // UTC with milliseconds; a sentence saying how
  std::optional<double> stop_s;       // detection until every surviving rank had stopped
  std::optional<double> recover_s;    // detection until the next step's first training step
  std::string excluded;               // the job's ExcNodeList set on requeue
  std::string avoided;  // nodes of the allocation kept out: lost in an earlier attempt
};

// The line (without its newline): the node-loss fields when lost_nodes is set, recover_s on
// node_lost lines (null when the next step never trained), excluded and avoided when set.
std::string to_line(const Attempt& attempt);
// The ledger line on `line`; nullopt when it is not one (not a JSON object with a string job_id
// and a known reason, a field of the wrong type, an unknown cause).
std::optional<Attempt> parse_attempt_line(std::string_view line);
// RUN_DIR/attempts.jsonl; malformed lines are skipped and counted. A missing file reads as empty.
std::vector<Attempt> read_attempts(const fs::path& run_dir, size_t* malformed = nullptr);
// Appends `attempt` as one line (one write, then fsync); throws common::FileError. Where the
// filesystem refuses the line (full), frees the room reserve_ledger_room kept and tries once more.
void append_attempt(const fs::path& run_dir, const Attempt& attempt);
// Keeps kLedgerRoomBytes in RUN_DIR/.ledger-reserve (the step supervisor, at each attempt's
// start), so that the ledger can still take its lines when the run directory fills up: on a full
// disk the attempt's end is otherwise lost, and with it the failure budget's count. False when it
// could not (the disk already full).
bool reserve_ledger_room(const fs::path& run_dir);
inline constexpr size_t kLedgerRoomBytes = 64 * 1024;

// Job attempts, as Slurm counts them: distinct (job_id, restart) pairs, not ledger lines.
size_t count_job_attempts(const std::vector<Attempt>& attempts);

// ---- submissions.jsonl: one line per submit, and per job a chain submitted.

struct Submission {
  std::string job_id;        // as sbatch printed it
  std::string submitted_at;  // UTC, ISO 8601
  size_t array_tasks = 0;    // 0 for a plain job
  // The job this one continues when the step supervisor submitted it as the next job of a chain
  // (Slurm refused the requeue); empty for a submit.
  std::string chained_from{};
};

std::string to_line(const Submission& submission);
// nullopt for a line that is not a submission (no string job_id, a field of the wrong type).
std::optional<Submission> parse_submission_line(std::string_view line);
// RUN_DIR/submissions.jsonl; malformed lines (a torn last line) are skipped and counted.
std::vector<Submission> read_submissions(const fs::path& run_dir, size_t* malformed = nullptr);
// The last submission (the one status, logs and cancel act on), if any.
std::optional<Submission> last_submission(const fs::path& run_dir);
// The chain the last of `submissions` belongs to, oldest first: the submit that began it and each
// job that continued the one before (chained_from), back from the last; the last alone when it
// continues none; empty when there is none.
std::vector<Submission> last_chain(const std::vector<Submission>& submissions);
// Appends `submission` as one line (one write, then fsync); throws common::FileError.
void append_submission(const fs::path& run_dir, const Submission& submission);

// ---- The field names, for readers outside C++ (the report's page).

// Every field each record's writer can write, in the writer's order: one entry per metrics kind
// (by its name), then "attempt" and "submission".
std::vector<std::pair<std::string, std::vector<std::string>>> field_names();

}  // namespace hpctrain::records
