// What `hpctrain list` shows: the run directories under a root and a summary of each, read from the
// run directory alone (the Slurm state is the caller's, from one query for all runs).
// Thread safety: functions are reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "run/run_dir.hpp"

namespace hpctrain::run {

// The run directories under `root` (root itself included), sorted by path. A run directory is a
// folder holding spec.toml and job.sbatch; the search does not descend into one (its checkpoints,
// logs and task folders are its own), nor follow symbolic links to folders. Throws RunDirError if
// `root` is not a readable directory.
std::vector<fs::path> find_run_dirs(const fs::path& root);

// The task-NNN folders (with a spec.toml) of an array run, by task number; empty for a plain run.
std::vector<std::pair<size_t, fs::path>> array_task_dirs(const fs::path& run_dir);

struct RunSummary {
  fs::path dir;                             // the run (or task) directory
  std::optional<int64_t> step;              // the last train line's step
  std::optional<int64_t> epoch;             // and its epoch
  std::optional<int64_t> max_steps;         // train.max_steps of the frozen spec, when set
  std::optional<int64_t> epochs;            // train.epochs of the frozen spec
  std::optional<double> top1;               // the last eval line's top-1, in [0, 1]
  size_t attempts = 0;                      // job attempts: (job_id, restart) pairs
  int64_t restarts = 0;                     // the highest SLURM_RESTART_COUNT an attempt saw
  std::optional<int64_t> checkpoint_step;   // the newest committed checkpoint
  std::optional<int64_t> checkpoint_age_s;  // seconds since its manifest was written
  std::string spec_error;                   // why the frozen spec did not load, if it did not
};

// Reads one run (or array task) directory: metrics, attempts, checkpoints, frozen spec. Missing
// or unreadable pieces are left empty; a frozen spec that does not load says why in spec_error.
RunSummary summarize_run(const fs::path& dir);

}  // namespace hpctrain::run
