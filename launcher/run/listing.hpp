// What `hpctrain list` shows: the run directories under a root, a summary of each read from the
// run directory alone, and its rows and table (the Slurm state is the caller's, from one query for
// all runs).
// Thread safety: functions are reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "run/goodput.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::run {

// The run directories under `root` (root itself included), sorted by path. A run directory is a
// folder holding spec.toml and job.sbatch; the search does not descend into one (its checkpoints,
// logs and task folders are its own), nor follow symbolic links to folders. Throws RunDirError if
// `root` is not a readable directory.
std::vector<fs::path> find_run_dirs(const fs::path& root);

// The task-NNN folders (with a spec.toml) of an array run, by task number; empty for a plain run.
std::vector<std::pair<size_t, fs::path>> array_task_dirs(const fs::path& run_dir);

struct RunSummary {
  fs::path dir;                                // the run (or task) directory
  std::optional<int64_t> step;                 // the last train line's step
  std::optional<int64_t> epoch;                // and its epoch
  std::optional<int64_t> max_steps;            // train.max_steps of the frozen spec, when set
  std::optional<int64_t> epochs;               // train.epochs of the frozen spec
  std::optional<double> top1;                  // the last eval line's top-1, in [0, 1]
  size_t attempts = 0;                         // job attempts: (job_id, restart) pairs
  int64_t restarts = 0;                        // the highest SLURM_RESTART_COUNT an attempt saw
  size_t chained = 0;                          // attempts a chain's next job continued
  std::vector<std::string> chain;              // the last submission's chain's job ids
  std::optional<int64_t> checkpoint_step;      // the newest committed checkpoint
  std::optional<int64_t> checkpoint_age_s;     // seconds since its manifest was written
  std::string spec_error;                      // why the frozen spec did not load, if it did not
  std::optional<records::Reason> last_reason;  // the ledger's last line's
  std::optional<records::Cause> last_cause;    // why its step ended, where the line says
  std::optional<Goodput> goodput;              // the goodput ledger, when asked for
};

// Reads one run (or array task) directory once (run/snapshot.hpp): metrics, attempts, checkpoints,
// frozen spec. Missing or unreadable pieces are left empty; a frozen spec that does not load says
// why in spec_error. With a `job_id` (the run's Slurm id) also its goodput ledger
// (run_goodput: `states` Slurm's answer, `slurm_answered` false when it gave none; at `now`).
RunSummary summarize_run(const fs::path& dir, const std::vector<slurm::JobState>& states = {},
                         const std::string& job_id = "", bool slurm_answered = false,
                         double now = 0);

// One row of `list` before it is read: a plain run, or one task of an array run.
struct ListEntry {
  fs::path dir;        // the run (or task) directory
  std::string job_id;  // the row's Slurm id: "123", or "123_4" for task 4; empty: not submitted
  std::optional<size_t> task;
  bool submitted = false;
};

// The rows of `list` for find_run_dirs' `dirs`: one per plain run, one per task of an array run
// (its task-NNN folders), in order; `job_ids` gets each submitted run's job id, for one Slurm
// query.
std::vector<ListEntry> list_entries(const std::vector<fs::path>& dirs,
                                    std::vector<std::string>& job_ids);

// `list --json`'s object: {"root", "runs": [a row per entry], "slurm_error" when the query
// failed}. Each row is summarize_run's (its chain as "chain", the job ids; its goodput ledger as
// "goodput", status --json's object, or null) and the ledger's last reason, with its state:
// Slurm's from
// `states` (by job id), "unsubmitted", "unknown" when the query failed, else the ledger's last
// word ("ledger:REASON") for a job Slurm no longer knows.
nlohmann::json list_rows(const fs::path& root, const std::vector<ListEntry>& entries,
                         const std::vector<slurm::JobState>& states,
                         const std::string& slurm_error);

// list_rows' runs as `list` prints them: a header and one line per run; a run continued by a chain
// says so after its restarts ("2 (chain: 3 jobs)"); GOODPUT is training over wall time.
void print_list(std::ostream& out, const nlohmann::json& listing);

}  // namespace hpctrain::run
