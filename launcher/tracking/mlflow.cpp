#include "tracking/mlflow.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace hpctrain::tracking {
namespace {

using nlohmann::json;

constexpr const char* kApi = "/api/2.0/mlflow";

// A double as MLflow's JSON (protobuf's) reads it: non-finite values as strings.
json number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

json pairs(const std::vector<KeyValue>& items, size_t from, size_t count) {
  json out = json::array();
  for (size_t i = from; i < from + count; ++i) {
    out.push_back({{"key", items[i].key}, {"value", items[i].value}});
  }
  return out;
}

RunInfo run_of(const json& run) {
  RunInfo r;
  const json& info = run.at("info");
  r.run_id = info.value("run_id", info.value("run_uuid", ""));
  r.experiment_id = info.value("experiment_id", "");
  r.status = info.value("status", "");
  r.artifact_uri = info.value("artifact_uri", "");
  r.lifecycle_stage = info.value("lifecycle_stage", "");
  const json data = run.value("data", json::object());
  for (const auto& m : data.value("metrics", json::array())) {
    r.latest_steps[m.at("key").get<std::string>()] = m.value("step", int64_t{0});
  }
  for (const auto& p : data.value("params", json::array())) {
    r.params[p.at("key").get<std::string>()] = p.value("value", "");
  }
  for (const auto& t : data.value("tags", json::array())) {
    r.tags[t.at("key").get<std::string>()] = t.value("value", "");
  }
  return r;
}

}  // namespace

std::string Mlflow::call(const char* what, const HttpResponse& response) {
  if (response.status >= 200 && response.status < 300) return response.body;
  std::string code = "HTTP_" + std::to_string(response.status), message;
  const json body = json::parse(response.body, nullptr, false);
  if (body.is_object()) {
    code = body.value("error_code", code);
    message = body.value("message", "");
  } else {
    message = response.body.substr(0, 200);
  }
  throw MlflowError(std::string(what) + " at " + http_.base() + ": HTTP " +
                        std::to_string(response.status) + " " + code +
                        (message.empty() ? "" : ": " + message),
                    code);
}

std::string Mlflow::experiment_id(const std::string& name) {
  const std::string get =
      std::string(kApi) + "/experiments/get-by-name?experiment_name=" + Http::escape(name);
  for (int round = 0; round < 2; ++round) {
    const auto found = http_.get(get);
    if (found.status == 200) {
      return json::parse(call("experiments/get-by-name", found))
          .at("experiment")
          .at("experiment_id")
          .get<std::string>();
    }
    try {
      call("experiments/get-by-name", found);
    } catch (const MlflowError& e) {
      if (e.code() != "RESOURCE_DOES_NOT_EXIST") throw;
    }
    const auto made =
        http_.post_json(std::string(kApi) + "/experiments/create", json{{"name", name}}.dump());
    try {
      return json::parse(call("experiments/create", made)).at("experiment_id").get<std::string>();
    } catch (const MlflowError& e) {
      // Created by another client meanwhile: found on the next round.
      if (e.code() != "RESOURCE_ALREADY_EXISTS") throw;
    }
  }
  throw MlflowError("experiment " + name + " at " + http_.base() + ": neither found nor created",
                    "RESOURCE_DOES_NOT_EXIST");
}

std::optional<std::string> Mlflow::find_run(const std::string& experiment_id,
                                            const std::string& key, const std::string& value) {
  // MLflow's filter grammar: a backquoted key, a single-quoted value with '' for a quote... its
  // parser (sqlparse) takes \' instead; a value with a quote or backslash is not searched for.
  if (value.find_first_of("'\\") != std::string::npos || key.find('`') != std::string::npos) {
    return std::nullopt;
  }
  const json request = {{"experiment_ids", {experiment_id}},
                        {"filter", "tags.`" + key + "` = '" + value + "'"},
                        {"run_view_type", "ACTIVE_ONLY"},
                        {"max_results", 10},
                        {"order_by", {"attributes.start_time ASC"}}};
  const json found = json::parse(
      call("runs/search", http_.post_json(std::string(kApi) + "/runs/search", request.dump())));
  for (const auto& run : found.value("runs", json::array())) {
    const RunInfo r = run_of(run);
    if (r.tags.count(key) && r.tags.at(key) == value) return r.run_id;
  }
  return std::nullopt;
}

RunInfo Mlflow::create_run(const std::string& experiment_id, const std::string& run_name,
                           int64_t start_ms, const std::vector<KeyValue>& tags) {
  const json request = {{"experiment_id", experiment_id},
                        {"run_name", run_name},
                        {"start_time", start_ms},
                        {"tags", pairs(tags, 0, tags.size())}};
  return run_of(json::parse(call("runs/create", http_.post_json(std::string(kApi) + "/runs/create",
                                                                request.dump())))
                    .at("run"));
}

RunInfo Mlflow::get_run(const std::string& run_id) {
  return run_of(json::parse(call("runs/get", http_.get(std::string(kApi) +
                                                       "/runs/get?run_id=" + Http::escape(run_id))))
                    .at("run"));
}

void Mlflow::log_batch(const std::string& run_id, const std::vector<MetricPoint>& metrics,
                       const std::vector<KeyValue>& params, const std::vector<KeyValue>& tags) {
  size_t m = 0, p = 0, t = 0;
  while (m < metrics.size() || p < params.size() || t < tags.size()) {
    const size_t np = std::min(params.size() - p, kMaxBatchParams);
    const size_t nt = std::min(tags.size() - t, kMaxBatchTags);
    const size_t nm = std::min({metrics.size() - m, kMaxBatchMetrics, kMaxBatchItems - np - nt});
    json request = {{"run_id", run_id},
                    {"metrics", json::array()},
                    {"params", pairs(params, p, np)},
                    {"tags", pairs(tags, t, nt)}};
    for (size_t i = m; i < m + nm; ++i) {
      request["metrics"].push_back({{"key", metrics[i].key},
                                    {"value", number(metrics[i].value)},
                                    {"timestamp", metrics[i].timestamp_ms},
                                    {"step", metrics[i].step}});
    }
    call("runs/log-batch", http_.post_json(std::string(kApi) + "/runs/log-batch", request.dump()));
    m += nm;
    p += np;
    t += nt;
  }
}

void Mlflow::update_run(const std::string& run_id, const std::string& status,
                        std::optional<int64_t> end_ms) {
  json request = {{"run_id", run_id}, {"status", status}};
  if (end_ms) request["end_time"] = *end_ms;
  call("runs/update", http_.post_json(std::string(kApi) + "/runs/update", request.dump()));
}

void Mlflow::upload_artifact(const std::string& artifact_uri, const std::string& name,
                             const std::string& bytes, const std::string& content_type) {
  // mlflow-artifacts:/1/RUN/artifacts or mlflow-artifacts://host:port/1/RUN/artifacts: the
  // path after the scheme (and authority) goes under the server's artifact API.
  const std::string scheme = "mlflow-artifacts:";
  if (artifact_uri.rfind(scheme, 0) != 0) {
    throw MlflowError("the run's artifact location " + artifact_uri +
                          " is not the tracking server's own (mlflow server --serve-artifacts)",
                      "UNSUPPORTED_ARTIFACT_URI");
  }
  std::string path = artifact_uri.substr(scheme.size());
  if (path.rfind("//", 0) == 0) {
    const size_t slash = path.find('/', 2);
    path = slash == std::string::npos ? "" : path.substr(slash);
  }
  while (!path.empty() && path.front() == '/') path.erase(path.begin());
  call("artifact upload",
       http_.put("/api/2.0/mlflow-artifacts/artifacts/" + path + "/" + Http::escape(name), bytes,
                 content_type));
}

}  // namespace hpctrain::tracking
