// The run directory: what `submit` writes there (frozen spec, script, submission record) and what
// `status` reads back (attempts ledger, checkpoints, metrics). docs/run-directory.md has the
// layout. Thread safety: functions are reentrant; concurrent submits to one run directory are
// serialised by a lock file.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "spec/spec.hpp"

namespace hpctrain::run {

namespace fs = std::filesystem;

// Thrown for run-directory problems (a different spec already there, unwritable directory, ...).
class RunDirError : public hpctrain::Error {
 public:
  using hpctrain::Error::Error;
};

// Writes `content` to `path` via a temporary file in the same directory, fsynced and renamed, then
// fsyncs the directory: readers see the old file or the new one, never a torn one.
void write_file_atomic(const fs::path& path, const std::string& content);

// Appends one line (a JSON object) with O_APPEND and fsync.
void append_line(const fs::path& path, const std::string& line);

// Throws RunDirError ("DIR is not a run directory (no spec.toml); see hpctrain submit") unless
// `dir` is a folder holding a frozen spec: what status, logs and report read.
void require_run_dir(const fs::path& dir);

// The run's frozen spec (DIR/spec.toml) through spec::load, paths unchecked (they were checked
// at submit time and may name another machine's files). Throws RunDirError naming the file and
// the first problem when it does not load.
spec::Spec read_frozen_spec(const fs::path& dir);

struct Prepared {
  fs::path run_dir;
  fs::path script;  // run_dir/job.sbatch
  size_t array_tasks = 0;
  bool spec_changed = false;  // an earlier, different spec was replaced (--force)
  // A different spec from a run directory that was never submitted nor run (a dry run) was
  // replaced; no --force is needed for that.
  bool unsubmitted_spec_replaced = false;
  // The outermost directory this call created (run_dir or one of its parents); empty when run_dir
  // existed already. discard_unsubmitted() removes it again.
  fs::path created;
};

// Creates the run directory (and logs/, task dirs for arrays), writes the frozen spec(s) and the
// script. Refuses to replace a different frozen spec unless `force`; the replaced spec is kept as
// spec.toml.replaced-N. Holds run_dir/.lock while it works.
// A run directory that was never submitted (no line in submissions.jsonl) and never run (no
// attempts, metrics or checkpoints) holds nothing but what a dry run wrote: a changed spec replaces
// its spec without `force`.
Prepared prepare(const spec::Resolved& resolved, const std::string& script, bool force);

// After a failed sbatch: removes what prepare() created (the run directory and the parents it
// made), unless a submission was recorded there meanwhile. A directory that existed before is
// left alone. Returns whether anything was removed.
bool discard_unsubmitted(const Prepared& prepared);

struct Submission {
  std::string job_id;
  std::string submitted_at;  // UTC, ISO 8601
  size_t array_tasks = 0;
  // The job this one continues when the step supervisor submitted it as the next job of a chain
  // (Slurm refused the requeue); empty for a submit.
  std::string chained_from{};
};

void record_submission(const fs::path& run_dir, const Submission& submission);
std::optional<Submission> last_submission(const fs::path& run_dir);

// One line of attempts.jsonl: one srun step of a job attempt (docs/run-directory.md). A job attempt
// (one job_id and restart) has several steps when it lost a node and went on in its allocation.
struct Attempt {
  std::string job_id, nodes, start, end, reason;
  std::optional<int64_t> array_task_id, last_step;
  int64_t restart = 0, exit_status = 0;
  int64_t step = 0;  // the srun step within the job attempt; 0 on lines that predate steps
  std::optional<int64_t> world_size;
  // Set on node_lost and node_lost_requeued lines: node names as written (comma-separated);
  // added_nodes is empty when the world shrank instead.
  std::string lost_nodes, added_nodes;
  std::string detected, detected_by;  // UTC with milliseconds; a sentence saying how
  std::optional<double> stop_s;       // detection until every surviving rank had stopped
  std::optional<double> recover_s;    // detection until the next step's first training step
  std::string cause;                  // node loss: "silent", "refused", "hang" or "straggler"
  std::string excluded;               // the job's ExcNodeList set on requeue
  std::string avoided;  // nodes of the allocation kept out: lost in an earlier attempt
};

// Reads attempts.jsonl; malformed lines are skipped and counted.
std::vector<Attempt> read_attempts(const fs::path& dir, size_t* malformed = nullptr);
// Appends `a` to attempts.jsonl as one line (one write, then fsync): what read_attempts reads.
// The node-loss fields are written when lost_nodes is set, recover_s on node_lost lines (null
// when the next step never trained), excluded and avoided when set. Throws RunDirError.
void append_attempt(const fs::path& dir, const Attempt& a);

// Whether the line ended its step because a node was lost (reason node_lost or
// node_lost_requeued).
bool is_node_loss(const Attempt& a);

// Job attempts, as Slurm counts them: distinct (job_id, restart) pairs, not ledger lines.
size_t count_job_attempts(const std::vector<Attempt>& attempts);

// A node loss and how the run went on, as status and report show it.
struct NodeLoss {
  size_t line = 0;  // its index in the attempts
  // The ranks of the step that took over (the next line of the same job attempt); unset while
  // that step runs, or when no step took over.
  bool next_step_ended = false;
  std::optional<int64_t> next_world_size;
  // "replaced" (spares took the lost nodes' places), "shrank" (the next step ran without them) or
  // "requeued" (the job fell back to a requeue).
  std::string outcome;
  bool recovered = false;  // training went on in the same allocation (recover_s is set)
};
std::vector<NodeLoss> node_losses(const std::vector<Attempt>& attempts);

// The newest checkpoint directory (named as the store names them) that has its manifest (the
// commit point).
std::optional<int64_t> last_committed_step(const fs::path& dir);
// Seconds since the manifest of checkpoint `step` was written; nullopt when it cannot be read.
std::optional<int64_t> checkpoint_age_s(const fs::path& dir, int64_t step);

// The complete lines of the last 64 KiB of metrics.jsonl (a line still being written is not
// complete); metrics files grow long and only the tail matters.
std::vector<std::string> metrics_tail(const fs::path& dir);
// The last complete line of metrics.jsonl, if any.
std::optional<std::string> last_metrics_line(const fs::path& dir);
// The last complete line of each kind ("train", "eval") in the tail of metrics.jsonl.
std::map<std::string, std::string> last_metrics_by_kind(const fs::path& dir);

// One line of metrics.jsonl (docs/run-directory.md): its kind ("train", "eval"), step, epoch and
// wall_time, and every other numeric field by name (loss, lr, top1, ...).
struct MetricsRecord {
  std::string kind;
  int64_t step = 0;
  int64_t epoch = 0;
  double wall_time = 0;
  std::map<std::string, double> values;
  std::map<std::string, std::string> texts;  // string fields but kind (slowest_host, tag)
};

// Every complete line of metrics.jsonl in file order. A resumed run writes the steps between its
// last checkpoint and the interruption again: both copies are kept, in the order written. Lines
// that are not a JSON object with a string kind and an integer step are skipped and counted.
std::vector<MetricsRecord> read_metrics(const fs::path& dir, size_t* malformed = nullptr);

}  // namespace hpctrain::run
