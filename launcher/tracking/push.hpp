// A run directory's tracking (docs/tracking.md): its params (the frozen spec, flattened), metrics
// (metrics.jsonl's train and eval figures, by step), tags (job ids, attempts, causes, final
// weights' fingerprint, the worker's hash, goodput), status and report page go to one MLflow run
// that survives requeues and chains. The launcher side pushes: the step supervisor after each
// attempt (when the compute node reaches the server), `hpctrain track` from a login node. A push is
// idempotent: it sends each metric's steps past the newest step the server holds, so a resumed
// attempt's repeated steps and a second push send nothing twice. The MLflow run's id and how the
// last push went are kept in RUN_DIR/tracking.json.
// Thread safety: push() takes RUN_DIR/tracking.lock (fcntl) against another push on this
// filesystem; the pure functions are reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/records.hpp"
#include "run/snapshot.hpp"
#include "tracking/mlflow.hpp"

namespace hpctrain::tracking {

namespace fs = std::filesystem;

// RUN_DIR/tracking.json (docs/run-directory.md).
struct TrackingState {
  std::string mlflow_uri, experiment, experiment_id, run_id;
  bool params_logged = false;
  std::string status;                   // the MLflow status last set
  std::optional<int64_t> through_step;  // the newest step the server held after the last push
  std::string report_of;                // what the uploaded report page showed (a summary key)
  std::string pushed_at;                // UTC: the last push that went through
  std::string error, error_at;          // the last push's failure; empty once one went through
};
inline constexpr const char* kStateFile = "tracking.json";
// nullopt when the file is missing or damaged (a push then finds its run by the run_dir tag).
std::optional<TrackingState> read_state(const fs::path& run_dir);
void write_state(const fs::path& run_dir, const TrackingState& state);

// The metric points of `records` the server does not hold: for each key, the steps after
// `latest` (the server's newest step of that key), each step once (its first record in file
// order, as a resumed attempt writes a step again). Keys: train.loss, train.lr,
// train.images_per_s, train.loss_scale, eval.loss, eval.top1, eval.top5; timestamps from
// wall_time.
std::vector<MetricPoint> new_points(const std::vector<records::MetricsRecord>& records,
                                    const std::map<std::string, int64_t>& latest);
// The frozen spec's keys and values (a string without its quotes), values cut at MLflow's limit.
std::vector<KeyValue> params_of(const spec::Spec& spec);
// The run's tags (hpctrain.*): run_dir (how a lost tracking.json finds the run again), job_ids,
// attempts, causes, last_reason, fingerprint, worker_sha256, goodput, launcher_version.
std::vector<KeyValue> tags_of(const run::Snapshot& snapshot, const std::string& run_dir);
// The MLflow status of a run with this ledger: FINISHED after a completed attempt, KILLED after a
// terminated one, FAILED after another final reason, else RUNNING; the end (Unix ms) with a final
// status.
struct RunStatus {
  std::string status;
  std::optional<int64_t> end_ms;
};
RunStatus status_of(const std::vector<records::Attempt>& attempts);

// What a push did.
struct PushOutcome {
  std::string run_id, experiment_id;
  bool created = false;  // the MLflow run was created by this push
  size_t metrics = 0;    // metric points sent
  std::optional<int64_t> through_step;
  std::string status;              // the run's MLflow status now
  bool report = false;             // the report page was uploaded
  std::vector<std::string> notes;  // what went wrong without stopping the push (the report)
};

// The spec has no tracking.mlflow_uri.
class NotTracked : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Pushes `run_dir` (a plain run's or an array task's directory) to the server of its frozen
// spec's [tracking], within `deadline`. Throws NotTracked, HttpUnreachable, MlflowError or
// run::RunDirError; a failure is recorded in tracking.json (error, error_at) before it is thrown.
PushOutcome push(const fs::path& run_dir, Clock::time_point deadline);

// One line for the user of what `outcome` did: "mlflow run 5f3c... (experiment 1) at URI: 12
// metric values through step 400, RUNNING, report uploaded".
std::string describe(const PushOutcome& outcome, const std::string& uri);

}  // namespace hpctrain::tracking
