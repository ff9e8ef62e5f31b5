// MLflow's REST API (the tracking server's /api/2.0/mlflow/... and, for artifacts, the
// /api/2.0/mlflow-artifacts/... that `mlflow server` serves), the calls hpctrain's tracking makes:
// an experiment by name, a run found by a tag or created, its latest metrics, a batch of metrics,
// params and tags, its status, and one artifact uploaded. Over tracking/http.hpp.
// Thread safety: an Mlflow is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tracking/http.hpp"

namespace hpctrain::tracking {

// The server answered a call with an error: the call, the HTTP status and MLflow's error code and
// message (or the start of the body when it is not MLflow's JSON).
class MlflowError : public std::runtime_error {
 public:
  MlflowError(const std::string& what, std::string code)
      : std::runtime_error(what), code_(std::move(code)) {}
  const std::string& code() const { return code_; }  // "RESOURCE_DOES_NOT_EXIST", ...

 private:
  std::string code_;
};

struct MetricPoint {
  std::string key;
  double value = 0;  // NaN and infinities allowed (sent as MLflow reads them)
  int64_t timestamp_ms = 0;
  int64_t step = 0;
};

struct KeyValue {
  std::string key, value;
};

struct RunInfo {
  std::string run_id, experiment_id, status, artifact_uri, lifecycle_stage;
  std::map<std::string, int64_t> latest_steps;  // each metric's newest step on the server
  std::map<std::string, std::string> params, tags;
};

// MLflow's batch limits: per log-batch call, metrics, params and tags (all together at most
// kMaxBatchItems), and a param value's length.
inline constexpr size_t kMaxBatchMetrics = 1000, kMaxBatchParams = 100, kMaxBatchTags = 100,
                        kMaxBatchItems = 1000, kMaxParamValue = 6000;

class Mlflow {
 public:
  explicit Mlflow(Http& http) : http_(http) {}

  // The id of the experiment `name`, created when missing (one created at the same time by
  // another client is found again).
  std::string experiment_id(const std::string& name);
  // The active run of `experiment_id` whose tag `key` is `value`, the oldest if several.
  std::optional<std::string> find_run(const std::string& experiment_id, const std::string& key,
                                      const std::string& value);
  RunInfo create_run(const std::string& experiment_id, const std::string& run_name,
                     int64_t start_ms, const std::vector<KeyValue>& tags);
  // Throws MlflowError with code RESOURCE_DOES_NOT_EXIST for an unknown run.
  RunInfo get_run(const std::string& run_id);
  // Sends everything, split into batches within MLflow's limits; metrics in the order given.
  void log_batch(const std::string& run_id, const std::vector<MetricPoint>& metrics,
                 const std::vector<KeyValue>& params, const std::vector<KeyValue>& tags);
  // status: RUNNING, FINISHED, FAILED or KILLED; end_ms with a final status.
  void update_run(const std::string& run_id, const std::string& status,
                  std::optional<int64_t> end_ms);
  // Uploads `bytes` as `name` under the run's artifact_uri, which must be the server's own
  // ("mlflow-artifacts:/..."; a server without --serve-artifacts hands out another kind, which
  // this throws MlflowError for with code UNSUPPORTED_ARTIFACT_URI).
  void upload_artifact(const std::string& artifact_uri, const std::string& name,
                       const std::string& bytes, const std::string& content_type);

 private:
  std::string call(const char* what, const HttpResponse& response);
  Http& http_;
};

}  // namespace hpctrain::tracking
