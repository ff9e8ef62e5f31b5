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

#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "run/run_dir.hpp"
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
json report_spec_summary(const fs::path& dir) {
  try {
    const auto s = run::read_frozen_spec(dir);
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
  } catch (const run::RunDirError& e) {
    return {{"error", e.what()}};
  }
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
json report_stragglers(const std::vector<run::MetricsRecord>& records) {
  struct Node {
    int64_t windows = 0, last_step = 0;
    double worst = 0;
  };
  std::map<std::string, Node> nodes;
  int64_t windows = 0;
  for (const auto& r : records) {
    if (r.kind != "ranks") continue;
    ++windows;
    const auto behind = r.values.find("behind_rank");
    const auto slowest = r.values.find("slowest_rank");
    const auto host = r.texts.find("slowest_host");
    // The rank behind is the window's slowest, whose host the record names.
    if (behind == r.values.end() || host == r.texts.end() || slowest == r.values.end() ||
        slowest->second != behind->second) {
      continue;
    }
    Node& n = nodes[host->second];
    ++n.windows;
    const auto busy = r.values.find("slowest_busy_s");
    const auto median = r.values.find("median_busy_s");
    if (busy != r.values.end() && median != r.values.end() && median->second > 0) {
      n.worst = std::max(n.worst, busy->second / median->second);
    }
    n.last_step = r.step;
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

// The train and eval records as columns (file order, repeats after a resume kept).
void report_metric_columns(const std::vector<run::MetricsRecord>& records, json& j) {
  static const std::map<std::string, std::vector<std::string>> kColumns = {
      {"train", {"loss", "lr", "images_per_s", "loss_scale"}},
      {"eval", {"loss", "top1", "top5", "samples", "seconds"}}};
  for (const auto& [kind, columns] : kColumns) {
    json cols;
    cols["step"] = json::array();
    cols["epoch"] = json::array();
    cols["wall_time"] = json::array();
    for (const auto& c : columns) cols[c] = json::array();
    for (const auto& r : records) {
      if (r.kind != kind) continue;
      cols["step"].push_back(r.step);
      cols["epoch"].push_back(r.epoch);
      cols["wall_time"].push_back(r.wall_time);
      for (const auto& c : columns) {
        auto v = r.values.find(c);
        // NaN and infinities have no JSON form: a gap in the chart.
        if (v == r.values.end() || !std::isfinite(v->second)) {
          cols[c].push_back(nullptr);
        } else {
          cols[c].push_back(v->second);
        }
      }
    }
    j[kind] = cols;
  }
}

// The attempts of attempts.jsonl, each node loss described on its line.
void report_attempts(const fs::path& dir, json& j) {
  size_t malformed_attempts = 0;
  j["attempts"] = json::array();
  const auto attempts = run::read_attempts(dir, &malformed_attempts);
  // One entry per ledger line (an srun step); "attempt" numbers the job attempts from 1, so the
  // steps of one job attempt share it.
  std::vector<std::pair<std::string, int64_t>> job_attempts;
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  for (const auto& a : attempts) {
    const auto key = std::make_pair(a.job_id, a.restart);
    auto at = std::find(job_attempts.begin(), job_attempts.end(), key);
    if (at == job_attempts.end()) at = job_attempts.insert(job_attempts.end(), key);
    json e{{"job_id", a.job_id},
           {"restart", a.restart},
           {"attempt", at - job_attempts.begin() + 1},
           {"step", a.step},
           {"world_size", opt(a.world_size)},
           {"nodes", a.nodes},
           {"start", a.start},
           {"end", a.end},
           {"start_time", report_unix_time(a.start)},
           {"end_time", report_unix_time(a.end)},
           {"exit_status", a.exit_status},
           {"reason", a.reason},
           {"last_step", nullptr}};
    if (a.last_step) e["last_step"] = *a.last_step;
    if (a.array_task_id) e["array_task_id"] = *a.array_task_id;
    j["attempts"].push_back(e);
  }
  j["job_attempts"] = job_attempts.size();
  for (const auto& n : run::node_losses(attempts)) {
    const auto& a = attempts[n.line];
    j["attempts"][n.line]["node_loss"] = {{"lost_nodes", a.lost_nodes},
                                          {"added_nodes", a.added_nodes},
                                          {"detected", a.detected},
                                          {"detected_time", report_unix_time(a.detected)},
                                          {"detected_by", a.detected_by},
                                          {"stop_s", opt(a.stop_s)},
                                          {"recover_s", opt(a.recover_s)},
                                          {"next_step_ended", n.next_step_ended},
                                          {"next_world_size", opt(n.next_world_size)},
                                          {"outcome", n.outcome},
                                          {"recovered", n.recovered}};
  }
  j["malformed_attempts_lines"] = malformed_attempts;
}

// One run directory: metrics as columns, attempts, stragglers, checkpoints, spec summary.
json report_describe(const fs::path& dir) {
  json j;
  j["dir"] = fs::absolute(dir).lexically_normal().string();
  j["exists"] = fs::is_directory(dir);
  j["spec"] =
      fs::exists(dir / layout::kSpec) ? report_spec_summary(dir) : json{{"error", "no spec.toml"}};
  size_t malformed = 0;
  const auto records = run::read_metrics(dir, &malformed);
  j["malformed_metrics_lines"] = malformed;
  report_metric_columns(records, j);
  report_attempts(dir, j);
  j["stragglers"] = report_stragglers(records);
  report_checkpoints(dir, j);
  return j;
}

}  // namespace

json collect(const fs::path& run_dir) {
  run::require_run_dir(run_dir);
  json out;
  out["run_dir"] = fs::absolute(run_dir).lexically_normal().string();
  out["generated_at"] = utc_now();
  out["spec"] = report_spec_summary(run_dir);
  out["runs"] = json::array();
  const auto submission = run::last_submission(run_dir);
  if (submission) {
    out["submission"] = {{"job_id", submission->job_id},
                         {"submitted_at", submission->submitted_at},
                         {"array_tasks", submission->array_tasks}};
  } else {
    out["submission"] = nullptr;
  }
  if (submission && submission->array_tasks > 0) {
    for (size_t t = 0; t < submission->array_tasks; ++t) {
      const std::string name = layout::task_dir_name(t);
      json r = report_describe(run_dir / name);
      r["name"] = name;
      r["task"] = t;
      out["runs"].push_back(r);
    }
  } else {
    json r = report_describe(run_dir);
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

std::string render_html(const json& data) {
  // Markers are replaced in the template only, never inside what was put in: a marker's text in
  // the data or in uPlot cannot be substituted again.
  const std::string_view tmpl = embedded::report_template();
  const std::string payload =
      escape_for_script(data.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace));
  const std::vector<std::pair<std::string_view, std::string_view>> fills = {
      {"/*@UPLOT_CSS@*/", embedded::uplot_css()},
      {"/*@UPLOT_JS@*/", embedded::uplot_js()},
      {"@REPORT_DATA@", payload}};
  std::string out;
  out.reserve(tmpl.size() + payload.size() + embedded::uplot_js().size() + 4096);
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
