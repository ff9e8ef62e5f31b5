// The run directory: what `submit` writes there (frozen spec, script; the submission record is
// common/records.hpp's) and what the commands read back besides the records: the frozen spec, the
// committed checkpoints, the node losses the ledger describes. docs/run-directory.md has the
// layout. Thread safety: functions are reentrant; concurrent submits to one run directory are
// serialised by a lock file.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/records.hpp"
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

// A node loss and how the run went on, as status and report show it.
struct NodeLoss {
  size_t line = 0;  // its index in the attempts
  // The ranks of the step that took over (the next line of the same job attempt); unset while
  // that step runs, or when no step took over.
  bool next_step_ended = false;
  std::optional<int64_t> next_world_size;
  // "replaced" (spares took the lost nodes' places), "shrank" (the next step ran without them),
  // "requeued" (the job fell back to a requeue) or "chained" (to the next job of a chain, Slurm
  // having refused the requeue).
  std::string outcome;
  bool recovered = false;  // training went on in the same allocation (recover_s is set)
};
std::vector<NodeLoss> node_losses(const std::vector<records::Attempt>& attempts);

// The newest checkpoint directory (named as the store names them) that has its manifest (the
// commit point).
std::optional<int64_t> last_committed_step(const fs::path& dir);
// Whether the newest committed checkpoint is the run's last: its trainer.json says
// "finished": true, which rank 0 writes only once training is over (rank 0's end of training, as
// the step supervisor's classifier needs it).
bool finished_at_checkpoint(const fs::path& dir);
// Whether the run directory's filesystem can take the next checkpoint, as statvfs says when a
// step has ended: "" when it can (or cannot be asked), else what is wrong, for the classifier:
// "DIR: read-only", or "DIR: 368 KiB free, less than the newest checkpoint took (2.2 MiB)" (with
// no checkpoint yet: under 1 MiB free). Both the run directory and its checkpoints directory
// (which may be a filesystem of its own) are asked.
std::string filesystem_trouble(const fs::path& dir);
// Seconds since the manifest of checkpoint `step` was written; nullopt when it cannot be read.
std::optional<int64_t> checkpoint_age_s(const fs::path& dir, int64_t step);

}  // namespace hpctrain::run
