// What a command knows of a run (or array task) directory, read from it once: the last
// submission and the chain of jobs it belongs to, the attempts ledger, metrics.jsonl, the newest
// committed checkpoint and, when asked for, the frozen spec and the array tasks' own snapshots.
// `status`, `list` and `report` work from a snapshot instead of opening the files again for each
// thing they show. Thread safety: read_snapshot is reentrant; a Snapshot is a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/records.hpp"
#include "spec/spec.hpp"

namespace hpctrain::run {

struct Snapshot {
  std::filesystem::path dir;
  std::optional<size_t> task;  // the array task this directory is, for a task's snapshot
  std::optional<records::Submission> submission;  // the last line of submissions.jsonl
  // The jobs of the last submission's chain, oldest first (records::last_chain): the last
  // submission alone unless Slurm refused a requeue and the run went on in a chain.
  std::vector<records::Submission> chain;
  std::vector<records::Attempt> attempts;
  size_t malformed_attempts = 0;
  records::MetricsRead metrics;
  std::optional<int64_t> checkpoint_step;   // the newest committed checkpoint
  std::optional<int64_t> checkpoint_age_s;  // seconds since its manifest was written
  // provenance.json (the worker binary, launcher/supervisor/provenance.hpp) and tracking.json (the
  // MLflow run, launcher/tracking/push.hpp) as written; null when missing or not a JSON object.
  nlohmann::json provenance, tracking;
  // With SnapshotParts::spec: the frozen spec, or why it did not load.
  std::optional<spec::Spec> spec;
  std::string spec_error;
  // With SnapshotParts::tasks, for an array run (its last submission's array_tasks): each
  // task-NNN folder's snapshot, by task number; the run's own ledger, metrics and checkpoint are
  // then left unread (a job array's are its tasks').
  std::vector<Snapshot> tasks;
};

struct SnapshotParts {
  bool spec = false;
  bool tasks = false;
};

// Reads `dir`: each file once; missing files read as empty.
Snapshot read_snapshot(const std::filesystem::path& dir, SnapshotParts parts = {});

// Restarts whatever their cause (our requeue, scontrol requeue, a node failure, a chain's next
// job): the highest restart an attempt saw (SLURM_RESTART_COUNT, counted on across a chain).
int64_t restarts(const std::vector<records::Attempt>& attempts);

// The job attempts (distinct job_id and restart) whose run the next job of a chain continued.
size_t chained_attempts(const std::vector<records::Attempt>& attempts);

// The job ids of `chain`, in order.
std::vector<std::string> job_ids(const std::vector<records::Submission>& chain);

}  // namespace hpctrain::run
