#include "report/report.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <string_view>
#include <vector>

#include "common/records.hpp"
#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "run/run_dir.hpp"
#include "run/snapshot.hpp"
#include "run/status.hpp"
#include "spec/choices.hpp"
#include "spec/spec.hpp"

namespace hpctrain::embedded {
std::string_view report_template();
std::string_view uplot_js();
std::string_view uplot_css();
}  // namespace hpctrain::embedded

namespace hpctrain::report {
namespace {

namespace fs = std::filesystem;
namespace F = records::field;
using nlohmann::json;

// A record's UTC time stamp (common/time.hpp's parse_utc) as Unix seconds: whole seconds as an
// integer, with the fraction when it has one; null when it is not a time stamp.
json report_unix_time(const std::string& text) {
  const std::optional<double> t = parse_utc(text);
  if (!t) return nullptr;
  if (*t == std::floor(*t)) return static_cast<int64_t>(*t);
  return *t;
}

// The spec's figures the header shows; {"error": ...} when spec.toml does not load.
json report_spec_summary(const run::Snapshot& snapshot) {
  if (!snapshot.spec) return {{"error", snapshot.spec_error}};
  const spec::Spec& s = *snapshot.spec;
  json j;
  j["name"] = s.job.name;
  j["model"] = std::string(spec::name_of(s.model.arch));
  j["num_classes"] = s.model.num_classes;
  if (s.data.synthetic) {
    j["dataset"] = "synthetic (" + std::to_string(s.data.synthetic_samples) + " images, " +
                   std::to_string(s.data.synthetic_image_size) + " px)";
  } else if (!s.data.train.empty()) {
    std::string d = fs::path(s.data.train.front()).filename().string();
    if (s.data.train.size() > 1) d += " + " + std::to_string(s.data.train.size() - 1) + " more";
    j["dataset"] = d;
    j["dataset_path"] = s.data.train.front();
  } else {
    j["dataset"] = "none";
  }
  j["nodes"] = s.job.nodes;
  j["tasks_per_node"] = s.job.tasks_per_node;
  j["gpus_per_node"] = s.job.gpus_per_node;
  j["epochs"] = s.train.epochs;
  if (s.train.max_steps) j["max_steps"] = *s.train.max_steps;
  j["batch_size"] = s.train.batch_size;
  j["precision"] = std::string(spec::name_of(s.train.precision));
  j["optimizer"] = std::string(spec::name_of(s.train.optimizer.name));
  j["lr"] = s.train.optimizer.lr;
  j["schedule"] = std::string(spec::name_of(s.train.schedule.name));
  return j;
}

// Committed checkpoints (step-NNNNNNNNN with manifest.json), by step, with the commit time from the
// manifest (its modification time when it has none), and the number of step directories not
// committed.
void report_checkpoints(const fs::path& dir, json& out) {
  out["checkpoints"] = json::array();
  out["uncommitted_checkpoints"] = 0;
  std::error_code ec;
  fs::directory_iterator it(dir / layout::kCheckpoints, ec);
  if (ec) return;
  std::vector<std::pair<int64_t, json>> found;
  size_t uncommitted = 0;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    // Only names the store writes are its steps (docs/checkpoint-format.md): "step-12" or
    // "step-0000000012" are someone else's.
    const std::string name = it->path().filename().string();
    if (layout::parse_checkpoint_temp_name(name)) {
      ++uncommitted;
      continue;
    }
    const auto parsed_step = layout::parse_checkpoint_name(name);
    if (!parsed_step) continue;
    const int64_t step = *parsed_step;
    const fs::path manifest = it->path() / layout::kManifest;
    if (!fs::exists(manifest, ec)) {
      ++uncommitted;
      continue;
    }
    json c{{"step", step}, {"time", nullptr}, {"committed_at", nullptr}};
    std::ifstream in(manifest);
    const json parsed = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("committed_at") &&
        parsed["committed_at"].is_string()) {
      c["committed_at"] = parsed["committed_at"];
      c["time"] = report_unix_time(parsed["committed_at"].get<std::string>());
    }
    if (c["time"].is_null()) {
      const auto written = fs::last_write_time(manifest, ec);
      if (!ec) {
        c["time"] = std::chrono::duration_cast<std::chrono::seconds>(
                        written - fs::file_time_type::clock::now() +
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
      }
    }
    found.emplace_back(step, c);
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [step, c] : found) out["checkpoints"].push_back(c);
  out["uncommitted_checkpoints"] = uncommitted;
}

// The worker's straggler windows ("ranks" records): per node, the log windows in which the worker
// found its rank clearly behind (the record's "behind_rank", train/straggler.hpp's verdict: this
// counts it, never tests again), the largest ratio to the median and the last such step; most
// windows first. "windows" is the count of all ranks records. Records of workers older than the
// verdict have no "behind_rank" and count for no node.
json report_stragglers(const std::vector<records::MetricsRecord>& metrics) {
  struct Node {
    int64_t windows = 0, last_step = 0;
    double worst = 0;
  };
  std::map<std::string, Node> nodes;
  int64_t windows = 0;
  for (const auto& record : metrics) {
    const auto* r = std::get_if<records::RanksRecord>(&record);
    if (!r) continue;
    ++windows;
    // The rank behind is the window's slowest, whose host the record names.
    if (!r->behind_rank || !r->slowest_host || r->slowest_rank != r->behind_rank) continue;
    Node& n = nodes[*r->slowest_host];
    ++n.windows;
    if (r->slowest_busy_s && r->median_busy_s && *r->median_busy_s > 0) {
      n.worst = std::max(n.worst, *r->slowest_busy_s / *r->median_busy_s);
    }
    n.last_step = r->step;
  }
  std::vector<std::pair<std::string, Node>> sorted(nodes.begin(), nodes.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.second.windows > b.second.windows;
  });
  json out = {{"windows", windows}, {"nodes", json::array()}};
  for (const auto& [host, n] : sorted) {
    out["nodes"].push_back({{"host", host},
                            {"windows", n.windows},
                            {"worst_ratio", n.worst},
                            {"last_step", n.last_step}});
  }
  return out;
}

// The train and eval records as columns, one per field the records' writer names (file order,
// repeats after a resume kept); a field a line lacks, or a number that is not finite, is null:
// a gap in the chart.
void report_metric_columns(const std::vector<records::MetricsRecord>& metrics, json& j) {
  for (const auto kind : {records::MetricsKind::kTrain, records::MetricsKind::kEval}) {
    const std::string name(records::name_of(kind));
    std::vector<std::string> columns;
    for (const auto& [record, fields] : records::field_names()) {
      if (record == name) columns = fields;
    }
    columns.erase(std::remove(columns.begin(), columns.end(), F::kKind), columns.end());
    json cols = json::object();
    for (const auto& c : columns) cols[c] = json::array();
    for (const auto& r : metrics) {
      if (records::kind_of(r) != kind) continue;
      const json line = records::to_json(r);
      for (const auto& c : columns) {
        const auto v = line.find(c);
        const bool finite = v != line.end() && v->is_number() && std::isfinite(v->get<double>());
        cols[c].push_back(finite ? *v : json(nullptr));
      }
    }
    j[name] = cols;
  }
}

// The attempts of attempts.jsonl, each node loss described on its line.
void report_attempts(const run::Snapshot& snapshot, json& j) {
  j["attempts"] = json::array();
  const auto& attempts = snapshot.attempts;
  // One entry per ledger line (an srun step); "attempt" numbers the job attempts from 1, so the
  // steps of one job attempt share it.
  std::vector<std::pair<std::string, int64_t>> job_attempts;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  for (const auto& a : attempts) {
    const auto key = std::make_pair(a.job_id, a.restart);
    auto at = std::find(job_attempts.begin(), job_attempts.end(), key);
    if (at == job_attempts.end()) at = job_attempts.insert(job_attempts.end(), key);
    json e{{F::kJobId, a.job_id},
           {F::kRestart, a.restart},
           {"attempt", at - job_attempts.begin() + 1},
           {F::kStep, a.srun_step},
           {F::kWorldSize, opt(a.world_size)},
           {F::kNodes, a.nodes},
           {F::kStart, a.start},
           {F::kEnd, a.end},
           {"start_time", report_unix_time(a.start)},
           {"end_time", report_unix_time(a.end)},
           {F::kExitStatus, a.exit_status},
           {F::kReason, records::name_of(a.reason)},
           {F::kCause, a.cause ? json(records::name_of(*a.cause)) : json(nullptr)},
           {F::kEvidence, a.evidence},
           {F::kLastStep, opt(a.last_step)}};
    if (a.array_task_id) e[F::kArrayTaskId] = *a.array_task_id;
    j["attempts"].push_back(e);
  }
  j["job_attempts"] = job_attempts.size();
  for (const auto& n : run::node_losses(attempts)) {
    const auto& a = attempts[n.line];
    j["attempts"][n.line]["node_loss"] = {{F::kLostNodes, a.lost_nodes},
                                          {F::kAddedNodes, a.added_nodes},
                                          {F::kDetected, a.detected},
                                          {"detected_time", report_unix_time(a.detected)},
                                          {F::kDetectedBy, a.detected_by},
                                          {F::kStopS, opt(a.stop_s)},
                                          {F::kRecoverS, opt(a.recover_s)},
                                          {"next_step_ended", n.next_step_ended},
                                          {"next_world_size", opt(n.next_world_size)},
                                          {"outcome", n.outcome},
                                          {"recovered", n.recovered}};
  }
  j["malformed_attempts_lines"] = snapshot.malformed_attempts;
}

// One run directory: metrics as columns, attempts, stragglers, checkpoints, spec summary.
json report_describe(const run::Snapshot& snapshot) {
  const fs::path& dir = snapshot.dir;
  json j;
  j["dir"] = fs::absolute(dir).lexically_normal().string();
  j["exists"] = fs::is_directory(dir);
  j["spec"] = fs::exists(dir / layout::kSpec) ? report_spec_summary(snapshot)
                                              : json{{"error", "no spec.toml"}};
  j["malformed_metrics_lines"] = snapshot.metrics.malformed;
  report_metric_columns(snapshot.metrics.records, j);
  report_attempts(snapshot, j);
  // The goodput ledger without asking Slurm: a run whose ledger has not ended is taken to go on.
  const auto goodput = run::run_goodput(snapshot, {}, "", /*slurm_answered=*/false, unix_time());
  j["goodput"] = goodput ? run::goodput_json(*goodput) : json(nullptr);
  j["stragglers"] = report_stragglers(snapshot.metrics.records);
  report_checkpoints(dir, j);
  return j;
}

}  // namespace

json collect(const fs::path& run_dir) {
  run::require_run_dir(run_dir);
  const run::Snapshot snapshot = run::read_snapshot(run_dir, {/*spec=*/true, /*tasks=*/true});
  json out;
  out["run_dir"] = fs::absolute(run_dir).lexically_normal().string();
  out["generated_at"] = utc_now();
  out["spec"] = report_spec_summary(snapshot);
  out["runs"] = json::array();
  const auto& submission = snapshot.submission;
  if (submission) {
    out["submission"] = {{F::kJobId, submission->job_id},
                         {F::kSubmittedAt, submission->submitted_at},
                         {F::kArrayTasks, submission->array_tasks}};
  } else {
    out["submission"] = nullptr;
  }
  // The jobs of its chain, oldest first (one, unless Slurm refused a requeue and the run went on
  // in the next job of a chain).
  out["chain"] = json::array();
  for (const auto& s : snapshot.chain) {
    json link{{F::kJobId, s.job_id}, {F::kSubmittedAt, s.submitted_at}};
    if (!s.chained_from.empty()) link[F::kChainedFrom] = s.chained_from;
    out["chain"].push_back(link);
  }
  if (submission && submission->array_tasks > 0) {
    for (const auto& task : snapshot.tasks) {
      json r = report_describe(task);
      r["name"] = layout::task_dir_name(*task.task);
      r["task"] = *task.task;
      out["runs"].push_back(r);
    }
  } else {
    json r = report_describe(snapshot);
    r["name"] = "";
    out["runs"].push_back(r);
  }
  return out;
}

std::string escape_for_script(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (const char c : json) {
    // Outside strings JSON has none of these characters; inside, the escape means the same.
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

// The timeline's colour of each ledger reason; every reason has one (the switch names them all).
const char* reason_color(records::Reason reason) {
  using records::Reason;
  switch (reason) {
    case Reason::kCompleted:
      return "#2e7d32";
    case Reason::kRequeued:
      return "#1e88e5";
    case Reason::kRestartLimit:
      return "#c2185b";
    case Reason::kFailedRequeued:
      return "#fb8c00";
    case Reason::kFailed:
      return "#d32f2f";
    case Reason::kTerminated:
      return "#8e24aa";
    case Reason::kSetupFailed:
      return "#6d4c41";
    case Reason::kNoProgress:
      return "#9e9d24";
    case Reason::kNodeLost:
      return "#3949ab";
    case Reason::kNodeLostRequeued:
      return "#546e7a";
    case Reason::kChained:
      return "#00acc1";
    case Reason::kFailedChained:
      return "#ffb300";
    case Reason::kNodeLostChained:
      return "#90a4ae";
  }
  return "#757575";
}

}  // namespace

json page_vocabulary() {
  json fields = json::object();
  for (const auto& [record, names] : records::field_names()) fields[record] = names;
  json kinds = json::array();
  for (const auto kind : records::all<records::MetricsKind>())
    kinds.push_back(records::name_of(kind));
  json reasons = json::array();
  for (const auto reason : records::all<records::Reason>()) {
    reasons.push_back({{"name", records::name_of(reason)}, {"color", reason_color(reason)}});
  }
  json causes = json::array();
  for (const auto cause : records::all<records::Cause>()) causes.push_back(records::name_of(cause));
  json losses = json::array();
  for (const auto loss : records::all<records::LossCause>())
    losses.push_back(records::name_of(loss));
  return {{"kinds", kinds},
          {"fields", fields},
          {"reasons", reasons},
          {"causes", causes},
          {"losses", losses}};
}

std::string render_html(const json& data) {
  // Markers are replaced in the template only, never inside what was put in: a marker's text in
  // the data or in uPlot cannot be substituted again.
  const std::string_view tmpl = embedded::report_template();
  const std::string payload =
      escape_for_script(data.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace));
  const std::string vocabulary = escape_for_script(page_vocabulary().dump());
  const std::vector<std::pair<std::string_view, std::string_view>> fills = {
      {"/*@UPLOT_CSS@*/", embedded::uplot_css()},
      {"/*@UPLOT_JS@*/", embedded::uplot_js()},
      {"/*@REPORT_VOCABULARY@*/", vocabulary},
      {"@REPORT_DATA@", payload}};
  std::string out;
  out.reserve(tmpl.size() + payload.size() + embedded::uplot_js().size() + vocabulary.size() +
              4096);
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t best = std::string_view::npos;
    const std::pair<std::string_view, std::string_view>* which = nullptr;
    for (const auto& f : fills) {
      const size_t at = tmpl.find(f.first, pos);
      if (at < best) best = at, which = &f;
    }
    if (!which) {
      out.append(tmpl.substr(pos));
      break;
    }
    out.append(tmpl.substr(pos, best - pos));
    out.append(which->second);
    pos = best + which->first.size();
  }
  return out;
}

}  // namespace hpctrain::report
