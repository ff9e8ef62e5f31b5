#include "tracking/push.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/durable_file.hpp"
#include "common/run_layout.hpp"
#include "common/unique_fd.hpp"
#include "drill/drill.hpp"
#include "report/report.hpp"
#include "run/run_dir.hpp"
#include "run/status.hpp"
#include "spec/document.hpp"
#include "version.hpp"

namespace hpctrain::tracking {
namespace {

using nlohmann::json;

int64_t to_ms(double unix_s) { return std::llround(unix_s * 1000); }

// Another push of this run directory (the supervisor's and a login node's `hpctrain track`)
// waits for this one, until the deadline.
class PushLock {
 public:
  PushLock(const fs::path& run_dir, Clock::time_point deadline) {
    const fs::path file = run_dir / "tracking.lock";
    fd_.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!fd_.valid()) {
      throw run::RunDirError("cannot open " + file.string() + ": " + std::strerror(errno));
    }
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    while (::fcntl(fd_.get(), F_SETLK, &lock) != 0) {
      if (errno != EACCES && errno != EAGAIN) {
        throw run::RunDirError("cannot lock " + file.string() + ": " + std::strerror(errno));
      }
      if (Clock::now() >= deadline) {
        throw HttpUnreachable(file.string() + " is held by another push that did not end in time");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

 private:
  UniqueFd fd_;
};

std::string first_sha256(const fs::path& run_dir) {
  std::ifstream in(run_dir / "provenance.json");
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("first") || !j["first"].is_object()) return "";
  return j["first"].value("sha256", "");
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

std::string run_name_of(const fs::path& run_dir) {
  const fs::path dir = fs::absolute(run_dir).lexically_normal();
  const std::string name = dir.filename().string().empty() ? dir.parent_path().filename().string()
                                                           : dir.filename().string();
  if (layout::parse_task_dir_name(name)) return dir.parent_path().filename().string() + "/" + name;
  return name;
}

// When the run began: its first attempt's start, else now.
int64_t start_ms_of(const run::Snapshot& s) {
  for (const auto& a : s.attempts) {
    if (const auto t = parse_utc(a.start)) return to_ms(*t);
  }
  return unix_time_ms();
}

// The params the server lacks; a key it holds with another value is noted and left out (MLflow
// refuses to change a param).
std::vector<KeyValue> missing_params(const std::vector<KeyValue>& params, const RunInfo& info,
                                     std::vector<std::string>& notes) {
  std::vector<KeyValue> out;
  for (const auto& p : params) {
    const auto it = info.params.find(p.key);
    if (it == info.params.end()) {
      out.push_back(p);
    } else if (it->second != p.value) {
      notes.push_back("param " + p.key + " is " + it->second + " on the server, " + p.value +
                      " in the spec; left as it is");
    }
  }
  return out;
}

std::string report_key(const run::Snapshot& s, const std::string& status) {
  return std::to_string(s.metrics.records.size()) + "/" + std::to_string(s.attempts.size()) + "/" +
         std::to_string(s.checkpoint_step.value_or(-1)) + "/" + status;
}

struct Session {
  fs::path dir;
  run::Snapshot snapshot;
  std::string uri;
  TrackingState state;
  Http http;
  Mlflow mlflow;
  Session(const fs::path& d, run::Snapshot s, std::string u, Clock::time_point deadline)
      : dir(d), snapshot(std::move(s)), uri(std::move(u)), http(uri, deadline), mlflow(http) {}
};

// The MLflow run of this directory: tracking.json's, else one tagged with its path, else a new
// one (its id written to tracking.json at once).
RunInfo find_or_create(Session& s, PushOutcome& out) {
  const std::string dir = fs::absolute(s.dir).lexically_normal().string();
  if (!s.state.run_id.empty() && s.state.mlflow_uri == s.uri) {
    try {
      RunInfo info = s.mlflow.get_run(s.state.run_id);
      if (info.lifecycle_stage != "deleted") return info;
      out.notes.push_back("MLflow run " + s.state.run_id +
                          " was deleted on the server; a new run takes its place");
    } catch (const MlflowError& e) {
      if (e.code() != "RESOURCE_DOES_NOT_EXIST") throw;
      out.notes.push_back("MLflow run " + s.state.run_id +
                          " is not on the server (a new database?); a new run takes its place");
    }
    s.state.params_logged = false;
    s.state.report_of.clear();
  }
  const auto& spec = *s.snapshot.spec;
  const std::string experiment = spec.tracking.experiment.value_or(spec.job.name);
  s.state.mlflow_uri = s.uri;
  s.state.experiment = experiment;
  s.state.experiment_id = s.mlflow.experiment_id(experiment);
  if (const auto found = s.mlflow.find_run(s.state.experiment_id, "hpctrain.run_dir", dir)) {
    s.state.run_id = *found;
  } else {
    const RunInfo made =
        s.mlflow.create_run(s.state.experiment_id, run_name_of(s.dir), start_ms_of(s.snapshot),
                            {{"hpctrain.run_dir", dir}, {"mlflow.source.name", "hpctrain"}});
    s.state.run_id = made.run_id;
    out.created = true;
  }
  write_state(s.dir, s.state);
  return s.mlflow.get_run(s.state.run_id);
}

void upload_report(Session& s, const RunInfo& info, PushOutcome& out) {
  const std::string key = report_key(s.snapshot, out.status);
  if (key == s.state.report_of) return;
  try {
    const std::string page = report::render_html(report::collect(s.dir));
    s.mlflow.upload_artifact(info.artifact_uri, layout::kReport, page, "text/html");
    s.state.report_of = key;
    out.report = true;
  } catch (const HttpUnreachable&) {
    throw;
  } catch (const std::exception& e) {
    out.notes.push_back(std::string("the report page was not uploaded: ") + e.what());
  }
}

PushOutcome push_locked(Session& s) {
  PushOutcome out;
  RunInfo info = find_or_create(s, out);
  out.run_id = s.state.run_id;
  out.experiment_id = s.state.experiment_id.empty() ? info.experiment_id : s.state.experiment_id;
  s.state.experiment_id = out.experiment_id;
  std::vector<KeyValue> params;
  if (!s.state.params_logged) {
    params = missing_params(params_of(*s.snapshot.spec), info, out.notes);
  }
  const auto points = new_points(s.snapshot.metrics.records, info.latest_steps);
  s.mlflow.log_batch(s.state.run_id, points, params,
                     tags_of(s.snapshot, fs::absolute(s.dir).lexically_normal().string()));
  s.state.params_logged = true;
  out.metrics = points.size();
  std::optional<int64_t> through;
  for (const auto& [key, step] : info.latest_steps)
    through = std::max(through.value_or(step), step);
  for (const auto& p : points) through = std::max(through.value_or(p.step), p.step);
  out.through_step = through;
  const RunStatus status = status_of(s.snapshot.attempts);
  out.status = status.status;
  if (status.status != info.status || status.status != s.state.status) {
    s.mlflow.update_run(s.state.run_id, status.status, status.end_ms);
  }
  s.state.status = status.status;
  upload_report(s, info, out);
  s.state.through_step = through;
  s.state.pushed_at = utc_now();
  s.state.error.clear();
  s.state.error_at.clear();
  write_state(s.dir, s.state);
  return out;
}

}  // namespace

std::optional<TrackingState> read_state(const fs::path& run_dir) {
  std::ifstream in(run_dir / kStateFile);
  if (!in) return std::nullopt;
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  TrackingState s;
  try {
    s.mlflow_uri = j.value("mlflow_uri", "");
    s.experiment = j.value("experiment", "");
    s.experiment_id = j.value("experiment_id", "");
    s.run_id = j.value("run_id", "");
    s.params_logged = j.value("params_logged", false);
    s.status = j.value("status", "");
    if (j.contains("through_step") && j["through_step"].is_number_integer()) {
      s.through_step = j["through_step"].get<int64_t>();
    }
    s.report_of = j.value("report_of", "");
    s.pushed_at = j.value("pushed_at", "");
    s.error = j.value("error", "");
    s.error_at = j.value("error_at", "");
  } catch (const json::exception&) {
    return std::nullopt;
  }
  return s;
}

void write_state(const fs::path& run_dir, const TrackingState& s) {
  const json j = {{"mlflow_uri", s.mlflow_uri},
                  {"experiment", s.experiment},
                  {"experiment_id", s.experiment_id},
                  {"run_id", s.run_id},
                  {"params_logged", s.params_logged},
                  {"status", s.status},
                  {"through_step", s.through_step ? json(*s.through_step) : json(nullptr)},
                  {"report_of", s.report_of},
                  {"pushed_at", s.pushed_at},
                  {"error", s.error},
                  {"error_at", s.error_at}};
  common::write_file_atomic(run_dir / kStateFile, j.dump(2) + "\n");
}

std::vector<MetricPoint> new_points(const std::vector<records::MetricsRecord>& records,
                                    const std::map<std::string, int64_t>& latest) {
  std::vector<MetricPoint> out;
  std::map<std::string, int64_t> newest = latest;  // per key: the newest step held or sent
  auto add = [&](const char* key, const std::optional<double>& value, int64_t step,
                 const std::optional<double>& wall_time) {
    if (!value) return;
    const auto it = newest.find(key);
    if (it != newest.end() && step <= it->second) return;
    newest[key] = step;
    out.push_back({key, *value, wall_time ? to_ms(*wall_time) : 0, step});
  };
  for (const auto& record : records) {
    if (const auto* t = std::get_if<records::TrainRecord>(&record)) {
      add("train.loss", t->loss, t->step, t->wall_time);
      add("train.lr", t->lr, t->step, t->wall_time);
      add("train.images_per_s", t->images_per_s, t->step, t->wall_time);
      add("train.loss_scale", t->loss_scale, t->step, t->wall_time);
    } else if (const auto* e = std::get_if<records::EvalRecord>(&record)) {
      add("eval.loss", e->loss, e->step, e->wall_time);
      add("eval.top1", e->top1, e->step, e->wall_time);
      add("eval.top5", e->top5, e->step, e->wall_time);
    }
  }
  return out;
}

std::vector<KeyValue> params_of(const spec::Spec& spec) {
  std::vector<KeyValue> out;
  for (auto [key, text] : spec::frozen_values(spec)) {
    // A string reads better as itself than as its TOML literal.
    if (!text.empty() && text.front() == '"') {
      try {
        const auto doc = spec::parse_text("v = " + text, key);
        if (doc.root.at("v").is_string()) text = doc.root.at("v").as_string().str;
      } catch (const std::exception&) {
        // Kept as the literal.
      }
    }
    if (text.size() > kMaxParamValue) text = text.substr(0, kMaxParamValue - 3) + "...";
    out.push_back({key, text});
  }
  return out;
}

std::vector<KeyValue> tags_of(const run::Snapshot& s, const std::string& run_dir) {
  std::vector<std::string> jobs = run::job_ids(s.chain), causes;
  for (const auto& a : s.attempts) {
    if (std::find(jobs.begin(), jobs.end(), a.job_id) == jobs.end()) jobs.push_back(a.job_id);
    causes.emplace_back(a.cause ? records::name_of(*a.cause) : records::name_of(a.reason));
  }
  std::vector<KeyValue> tags = {
      {"hpctrain.run_dir", run_dir},
      {"hpctrain.job_ids", joined(jobs)},
      {"hpctrain.attempts", std::to_string(records::count_job_attempts(s.attempts))},
      {"hpctrain.causes", joined(causes)},
      {"hpctrain.launcher_version", std::string(kVersion) + "+" + kCommit}};
  if (!s.attempts.empty()) {
    tags.push_back(
        {"hpctrain.last_reason", std::string(records::name_of(s.attempts.back().reason))});
  }
  const auto prints = drill::final_fingerprints(s.dir);
  if (!prints.empty()) {
    tags.push_back({"hpctrain.fingerprint", joined({prints.begin(), prints.end()})});
  }
  if (const std::string sha = first_sha256(s.dir); !sha.empty()) {
    tags.push_back({"hpctrain.worker_sha256", sha});
  }
  const std::string job = s.submission ? s.submission->job_id : std::string();
  if (const auto g = run::run_goodput(s, {}, job, false, unix_time())) {
    tags.push_back({"hpctrain.goodput", run::goodput_percent(run::goodput_json(*g))});
  }
  return tags;
}

RunStatus status_of(const std::vector<records::Attempt>& attempts) {
  if (attempts.empty()) return {"RUNNING", std::nullopt};
  const auto& last = attempts.back();
  if (!records::is_final(last.reason)) return {"RUNNING", std::nullopt};
  const auto end = parse_utc(last.end);
  const std::optional<int64_t> end_ms = end ? std::optional<int64_t>(to_ms(*end)) : std::nullopt;
  switch (last.reason) {
    case records::Reason::kCompleted:
      return {"FINISHED", end_ms};
    case records::Reason::kTerminated:
      return {"KILLED", end_ms};
    default:
      return {"FAILED", end_ms};
  }
}

PushOutcome push(const fs::path& run_dir, Clock::time_point deadline) {
  run::Snapshot snapshot = run::read_snapshot(run_dir, {.spec = true});
  if (!snapshot.spec) {
    throw run::RunDirError(run_dir.string() +
                           ": the frozen spec does not load: " + snapshot.spec_error);
  }
  if (!snapshot.spec->tracking.mlflow_uri) {
    throw NotTracked((run_dir / layout::kSpec).string() +
                     " has no tracking.mlflow_uri: the run is not tracked (docs/tracking.md)");
  }
  const std::string uri = *snapshot.spec->tracking.mlflow_uri;
  PushLock lock(run_dir, deadline);
  Session session(run_dir, std::move(snapshot), uri, deadline);
  session.state = read_state(run_dir).value_or(TrackingState{});
  try {
    return push_locked(session);
  } catch (const std::exception& e) {
    session.state.error = e.what();
    session.state.error_at = utc_now();
    try {
      write_state(run_dir, session.state);
    } catch (const std::exception&) {
      // The run directory cannot take it: the caller says the error all the same.
    }
    throw;
  }
}

std::string describe(const PushOutcome& o, const std::string& uri) {
  std::string line = "mlflow run " + o.run_id + (o.created ? " (new)" : "") + " in experiment " +
                     o.experiment_id + " at " + uri + ": " + std::to_string(o.metrics) +
                     " metric value" + (o.metrics == 1 ? "" : "s") + " sent";
  if (o.through_step) line += ", through step " + std::to_string(*o.through_step);
  line += ", " + o.status;
  if (o.report) line += ", report uploaded";
  return line;
}

}  // namespace hpctrain::tracking
