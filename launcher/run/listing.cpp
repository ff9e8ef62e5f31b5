#include "run/listing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "run/snapshot.hpp"
#include "run/status.hpp"

namespace hpctrain::run {
namespace {

bool is_run_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / layout::kSpec, ec) &&
         fs::is_regular_file(dir / layout::kScript, ec);
}

void collect_run_dirs(const fs::path& dir, std::vector<fs::path>& out, int depth) {
  if (is_run_dir(dir)) {
    out.push_back(dir);
    return;
  }
  // Deep enough for any sensible tree of runs; a guard against pathological nesting.
  if (depth >= 32) return;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_symlink(type_ec) || !it->is_directory(type_ec)) continue;
    collect_run_dirs(it->path(), out, depth + 1);
  }
}

std::string list_age(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + "m";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds / 86400) + "d";
}

// "700/2000" with train.max_steps; "700 (epoch 2/3)" without, since the launcher does not know
// the steps per epoch (they depend on the dataset's size); "-" before the first train line.
std::string list_progress(const nlohmann::json& r) {
  std::string out = r["step"].is_null() ? "-" : std::to_string(r["step"].get<int64_t>());
  if (!r["max_steps"].is_null()) return out + "/" + std::to_string(r["max_steps"].get<int64_t>());
  if (!r["epoch"].is_null() && !r["epochs"].is_null()) {
    out += " (epoch " + std::to_string(r["epoch"].get<int64_t>()) + "/" +
           std::to_string(r["epochs"].get<int64_t>()) + ")";
  }
  return out;
}

// "2", or "2 (chain: 3 jobs)" for a run that the jobs of a chain continued.
std::string list_restarts(const nlohmann::json& r) {
  std::string out = std::to_string(r["restarts"].get<int64_t>());
  if (r["chain"].size() > 1) out += " (chain: " + std::to_string(r["chain"].size()) + " jobs)";
  return out;
}

// "75.00%", or "-" before the first evaluation.
std::string list_top1(const nlohmann::json& r) {
  if (r["top1"].is_null()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", r["top1"].get<double>() * 100);
  return buf;
}

// "step 200, 5m ago", or "none".
std::string list_checkpoint(const nlohmann::json& r) {
  if (r["checkpoint_step"].is_null()) return "none";
  std::string out = "step " + std::to_string(r["checkpoint_step"].get<int64_t>());
  if (!r["checkpoint_age_s"].is_null()) {
    out += ", " + list_age(r["checkpoint_age_s"].get<int64_t>()) + " ago";
  }
  return out;
}

nlohmann::json list_row(const fs::path& root, const ListEntry& e, const RunSummary& s) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  std::string name = e.dir.lexically_relative(root).string();
  if (name.empty()) name = ".";
  nlohmann::json r = {
      {"name", name},
      {"run_dir", fs::absolute(e.dir).lexically_normal().string()},
      {"job_id", e.job_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.job_id)},
      {"task", opt(e.task)},
      {"step", opt(s.step)},
      {"epoch", opt(s.epoch)},
      {"max_steps", opt(s.max_steps)},
      {"epochs", opt(s.epochs)},
      {"top1", opt(s.top1)},
      {"attempts", s.attempts},
      {"restarts", s.restarts},
      {"chained", s.chained},
      {"chain", s.chain},
      {"checkpoint_step", opt(s.checkpoint_step)},
      {"checkpoint_age_s", opt(s.checkpoint_age_s)}};
  if (!s.spec_error.empty()) r["spec_error"] = s.spec_error;
  r["last_reason"] =
      s.last_reason ? nlohmann::json(records::name_of(*s.last_reason)) : nlohmann::json(nullptr);
  r["last_cause"] =
      s.last_cause ? nlohmann::json(records::name_of(*s.last_cause)) : nlohmann::json(nullptr);
  r["goodput"] = s.goodput ? goodput_json(*s.goodput) : nlohmann::json(nullptr);
  return r;
}

}  // namespace

std::vector<fs::path> find_run_dirs(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) throw RunDirError(root.string() + " does not exist");
  if (!fs::is_directory(root, ec)) throw RunDirError(root.string() + " is not a directory");
  fs::directory_iterator probe(root, ec);
  if (ec) throw RunDirError("cannot read " + root.string() + ": " + ec.message());
  std::vector<fs::path> out;
  collect_run_dirs(root, out, 0);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<size_t, fs::path>> array_task_dirs(const fs::path& run_dir) {
  std::vector<std::pair<size_t, fs::path>> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto task = layout::parse_task_dir_name(it->path().filename().string());
    if (!task || !fs::is_regular_file(it->path() / layout::kSpec)) continue;
    out.emplace_back(*task, it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

RunSummary summarize_run(const fs::path& dir, const std::vector<slurm::JobState>& states,
                         const std::string& job_id, bool slurm_answered, double now) {
  const Snapshot snapshot = read_snapshot(dir, {/*spec=*/true, /*tasks=*/false});
  RunSummary s;
  s.dir = dir;
  const auto& records = snapshot.metrics.records;
  if (const auto* t = records::last_of<records::TrainRecord>(records)) {
    s.step = t->step;
    s.epoch = t->epoch.value_or(0);
  }
  // The last eval line's top-1, or the one before it when the last has none.
  for (auto it = records.rbegin(); it != records.rend() && !s.top1; ++it) {
    const auto* e = std::get_if<records::EvalRecord>(&*it);
    if (e && e->top1 && std::isfinite(*e->top1)) s.top1 = e->top1;
  }
  s.attempts = records::count_job_attempts(snapshot.attempts);
  s.restarts = restarts(snapshot.attempts);
  s.chained = chained_attempts(snapshot.attempts);
  s.chain = job_ids(snapshot.chain);
  if (!snapshot.attempts.empty()) {
    s.last_reason = snapshot.attempts.back().reason;
    s.last_cause = snapshot.attempts.back().cause;
  }
  s.checkpoint_step = snapshot.checkpoint_step;
  s.checkpoint_age_s = snapshot.checkpoint_age_s;
  if (snapshot.spec) {
    s.max_steps = snapshot.spec->train.max_steps;
    s.epochs = snapshot.spec->train.epochs;
  }
  s.spec_error = snapshot.spec_error;
  if (!job_id.empty()) s.goodput = run_goodput(snapshot, states, job_id, slurm_answered, now);
  return s;
}

std::vector<ListEntry> list_entries(const std::vector<fs::path>& dirs,
                                    std::vector<std::string>& job_ids) {
  std::vector<ListEntry> rows;
  for (const auto& dir : dirs) {
    const auto submission = records::last_submission(dir);
    if (submission) job_ids.push_back(submission->job_id);
    const auto tasks = array_task_dirs(dir);
    if (tasks.empty()) {
      rows.push_back({dir, submission ? submission->job_id : "", std::nullopt, bool(submission)});
    }
    for (const auto& [t, task_dir] : tasks) {
      rows.push_back({task_dir, submission ? submission->job_id + "_" + std::to_string(t) : "", t,
                      bool(submission)});
    }
  }
  return rows;
}

nlohmann::json list_rows(const fs::path& root, const std::vector<ListEntry>& entries,
                         const std::vector<slurm::JobState>& states,
                         const std::string& slurm_error) {
  std::map<std::string, const slurm::JobState*> by_id;
  for (const auto& s : states) by_id[s.job_id] = &s;
  nlohmann::json out = {{"root", fs::absolute(root).lexically_normal().string()},
                        {"runs", nlohmann::json::array()}};
  if (!slurm_error.empty()) out["slurm_error"] = slurm_error;
  const double now = unix_time();
  for (const auto& e : entries) {
    const auto summary = summarize_run(e.dir, states, e.job_id, slurm_error.empty(), now);
    auto r = list_row(root, e, summary);
    std::string state;
    if (!e.submitted) {
      state = "unsubmitted";
    } else if (!slurm_error.empty()) {
      // Slurm did not answer: a run whose ledger says it ended is known all the same.
      const bool ended = summary.last_reason && records::is_final(*summary.last_reason);
      state = ended ? "ledger:" + r["last_reason"].get<std::string>() : "unknown";
      if (ended) r["state_source"] = "ledger";
    } else if (auto it = by_id.find(e.job_id); it != by_id.end()) {
      state = it->second->state;
      r["state_source"] = it->second->source;
    } else {
      // Neither squeue nor sacct knows it (purged, accounting off): the ledger's last word.
      state =
          r["last_reason"].is_null() ? "unknown" : "ledger:" + r["last_reason"].get<std::string>();
      r["state_source"] = r["last_reason"].is_null() ? nullptr : nlohmann::json("ledger");
    }
    r["state"] = state;
    out["runs"].push_back(r);
  }
  return out;
}

void print_list(std::ostream& out, const nlohmann::json& listing) {
  size_t name_width = 4;
  for (const auto& r : listing["runs"]) {
    name_width = std::max(name_width, r["name"].get<std::string>().size());
  }
  auto pad = [](std::string s, size_t width) {
    if (s.size() < width) s.append(width - s.size(), ' ');
    return s;
  };
  out << pad("RUN", name_width) << "  " << pad("STATE", 16) << "  " << pad("STEP", 18) << "  "
      << pad("TOP-1", 7) << "  " << pad("RESTARTS", 8) << "  " << pad("ENDED", 12) << "  "
      << pad("GOODPUT", 12) << "  CHECKPOINT\n";
  for (const auto& r : listing["runs"]) {
    out << pad(r["name"].get<std::string>(), name_width) << "  "
        << pad(r["state"].get<std::string>(), 16) << "  " << pad(list_progress(r), 18) << "  "
        << pad(list_top1(r), 7) << "  " << pad(list_restarts(r), 8) << "  "
        << pad(r["last_cause"].is_null() ? "-" : r["last_cause"].get<std::string>(), 12) << "  "
        << pad(r["goodput"].is_null() ? "-" : goodput_percent(r["goodput"]), 12) << "  "
        << list_checkpoint(r) << '\n';
  }
}

}  // namespace hpctrain::run
