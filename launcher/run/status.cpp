#include "run/status.hpp"

#include <cstdio>

#include "common/run_layout.hpp"
#include "run/run_dir.hpp"
#include "run/trend.hpp"

namespace hpctrain::run {
namespace {

namespace fs = std::filesystem;

// The node losses of the ledger, one object each: what was lost and added, when and how it was
// detected, how long stopping and recovering took, and how the run went on ("replaced": a spare
// took the lost node's place; "shrank": the next step ran on fewer ranks; "requeued": the job was
// requeued instead). "recovered" is whether training went on in the same allocation.
nlohmann::json node_loss_records(const std::vector<Attempt>& attempts) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : node_losses(attempts)) {
    const auto& a = attempts[n.line];
    out.push_back({{"job_id", a.job_id},
                   {"restart", a.restart},
                   {"step", a.step},
                   {"reason", a.reason},
                   {"lost_nodes", a.lost_nodes},
                   {"added_nodes", a.added_nodes},
                   {"detected", a.detected},
                   {"detected_by", a.detected_by},
                   {"stop_s", opt(a.stop_s)},
                   {"recover_s", opt(a.recover_s)},
                   {"world_size", opt(a.world_size)},
                   {"next_step_ended", n.next_step_ended},
                   {"next_world_size", opt(n.next_world_size)},
                   {"outcome", n.outcome},
                   {"recovered", n.recovered}});
  }
  return out;
}

// "node2 at 23:41:08 (slurmd on node2 refused the connection); survivors stopped in 1.3 s;
// replaced by node4; training again after 22.8 s": one node loss as status prints it.
std::string node_loss_text(const nlohmann::json& e) {
  auto seconds = [](const nlohmann::json& v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", v.get<double>());
    return std::string(buf);
  };
  std::string out = e["lost_nodes"].get<std::string>();
  if (out.empty()) out = "a node";
  const auto detected = e["detected"].get<std::string>();
  // "2026-11-23T23:41:08.412Z": the time of day; anything else as written.
  if (detected.size() >= 19 && detected[10] == 'T') {
    out += " at " + detected.substr(11, 8);
  } else if (!detected.empty()) {
    out += " at " + detected;
  }
  if (!e["detected_by"].get<std::string>().empty()) {
    out += " (" + e["detected_by"].get<std::string>() + ")";
  }
  if (e["stop_s"].is_number()) out += "; survivors stopped in " + seconds(e["stop_s"]);
  const auto outcome = e["outcome"].get<std::string>();
  if (outcome == "requeued") return out + "; fell back to requeue";
  if (outcome == "replaced") {
    out += "; replaced by " + e["added_nodes"].get<std::string>();
  } else if (e["next_world_size"].is_number_integer()) {
    out += "; world shrank to " + std::to_string(e["next_world_size"].get<int64_t>()) + " ranks";
  } else {
    out += "; world shrank";
  }
  if (e["recover_s"].is_number()) {
    out += "; training again after " + seconds(e["recover_s"]);
  } else if (e["next_step_ended"].get<bool>()) {
    // The next step ended without recording a training step: the replacement never started.
    out += "; the replacement step never trained";
  }
  return out;
}

// "step 200, committed 31 s ago", or "none committed".
std::string checkpoint_text(const nlohmann::json& d) {
  if (d["last_checkpoint_step"].is_null()) return "none committed";
  std::string out = "step " + std::to_string(d["last_checkpoint_step"].get<int64_t>());
  if (d.contains("last_checkpoint_age_s")) {
    out += ", committed " + std::to_string(d["last_checkpoint_age_s"].get<int64_t>()) + " s ago";
  }
  return out;
}

// m[key] with `digits` after the point in fixed notation, or significant digits in %g form when
// negative (-6: %g's default), so that every format is a literal the compiler checks; "?" when
// missing.
std::string number(const nlohmann::json& m, const char* key, int digits, double scale) {
  if (!m.contains(key) || !m[key].is_number()) return "?";
  char buf[64];
  const double v = m[key].get<double>() * scale;
  if (digits >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  } else {
    std::snprintf(buf, sizeof buf, "%.*g", -digits, v);
  }
  return buf;
}

// Which steps a train record's images/s covers: its log window, as the worker's line says
// (docs/runtime.md); the worker's final line gives the attempt's average.
std::string window_text(const nlohmann::json& m) {
  if (m.contains("window_first_step") && m["window_first_step"].is_number() && m.contains("step") &&
      m["step"].is_number()) {
    return " (steps " + number(m, "window_first_step", 0, 1) + "-" + number(m, "step", 0, 1) + ")";
  }
  return " (the last log window)";
}

// "loss 2.304 -> 0.412 over steps 20..700  ▇▆▅▄▃▃▂▂▁▁": the sparkline is relative (lowest bucket
// to highest); "!" marks a bucket whose losses were all NaN or infinite.
std::string trend_text(const nlohmann::json& t) {
  auto loss = [](const nlohmann::json& v) {
    if (!v.is_number()) return std::string("non-finite");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
    return std::string(buf);
  };
  std::string out = "loss " + loss(t["first_loss"]);
  if (t["points"].get<size_t>() > 1) {
    out += " -> " + loss(t["last_loss"]) + " over steps " +
           std::to_string(t["first_step"].get<int64_t>()) + ".." +
           std::to_string(t["last_step"].get<int64_t>());
  } else {
    out += " at step " + std::to_string(t["first_step"].get<int64_t>());
  }
  out += "  " + t["sparkline"].get<std::string>();
  if (t["non_finite"].get<size_t>() > 0) {
    out += " (" + std::to_string(t["non_finite"].get<size_t>()) + " of " +
           std::to_string(t["points"].get<size_t>()) + " steps with a non-finite loss)";
  }
  return out;
}

// The worker's straggler report: each rank's own work per step before it waits for the others;
// the slowest one, against the median. Nothing when the record does not name a slowest rank.
std::optional<std::string> ranks_text(const nlohmann::json& m) {
  const auto ms = [](const nlohmann::json& v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f ms", v.is_number() ? 1000 * v.get<double>() : 0.0);
    return std::string(buf);
  };
  const auto slowest = m.value("slowest_rank", nlohmann::json());
  const auto p50 = m.value("busy_p50_s", nlohmann::json::array());
  const auto p95 = m.value("busy_p95_s", nlohmann::json::array());
  if (!slowest.is_number_integer() || slowest.get<int64_t>() < 0 ||
      static_cast<size_t>(slowest.get<int64_t>()) >= p50.size() || p50.size() != p95.size()) {
    return std::nullopt;
  }
  const auto r = static_cast<size_t>(slowest.get<int64_t>());
  const auto host = m.value("slowest_host", nlohmann::json());
  const double median = m.value("median_busy_s", 0.0);
  std::string out = "slowest rank " + std::to_string(r) +
                    (host.is_string() ? " (" + host.get<std::string>() + ")" : std::string()) +
                    ", busy " + ms(p50[r]) + " a step (p50; p95 " + ms(p95[r]) +
                    "), the median rank " + ms(median);
  if (median > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, " (%.1fx)", p50[r].get<double>() / median);
    out += ratio;
  }
  return out + ", at step " + number(m, "step", 0, 1);
}

}  // namespace

nlohmann::json describe_run_dir(const fs::path& dir) {
  nlohmann::json j;
  size_t malformed = 0;
  const auto attempts = read_attempts(dir, &malformed);
  // Restarts whatever their cause (our requeue, scontrol requeue, a node failure): the highest
  // SLURM_RESTART_COUNT an attempt saw.
  int64_t restarts = 0;
  for (const auto& a : attempts) restarts = std::max<int64_t>(restarts, a.restart);
  // Job attempts, not ledger lines: a job attempt that lost a node and went on in its allocation
  // wrote a line per srun step.
  j["attempts"] = count_job_attempts(attempts);
  j["restarts"] = restarts;
  if (malformed) j["malformed_ledger_lines"] = malformed;
  if (!attempts.empty()) {
    const auto& a = attempts.back();
    j["last_attempt"] = {{"job_id", a.job_id},
                         {"restart", a.restart},
                         {"step", a.step},
                         {"nodes", a.nodes},
                         {"start", a.start},
                         {"end", a.end},
                         {"exit_status", a.exit_status},
                         {"reason", a.reason}};
  }
  j["node_losses"] = node_loss_records(attempts);
  size_t recovered = 0;
  for (const auto& e : j["node_losses"]) recovered += e["recovered"].get<bool>() ? 1 : 0;
  j["node_losses_recovered"] = recovered;
  if (auto step = last_committed_step(dir)) {
    j["last_checkpoint_step"] = *step;
    if (const auto age = checkpoint_age_s(dir, *step)) j["last_checkpoint_age_s"] = *age;
  } else {
    j["last_checkpoint_step"] = nullptr;
  }
  if (auto line = last_metrics_line(dir)) {
    try {
      j["last_metrics"] = nlohmann::json::parse(*line);
    } catch (const std::exception&) {
      j["last_metrics"] = *line;
    }
  }
  for (const auto& [kind, line] : last_metrics_by_kind(dir)) {
    if (kind == "train" || kind == "eval" || kind == "ranks") {
      j["last_" + kind] = nlohmann::json::parse(line);
    }
  }
  if (const auto trend = loss_trend(read_metrics(dir))) {
    auto loss = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nullptr; };
    nlohmann::json buckets = nlohmann::json::array();
    for (const auto& b : trend->buckets) buckets.push_back(loss(b));
    j["loss_trend"] = {{"first_step", trend->first_step},
                       {"last_step", trend->last_step},
                       {"first_loss", loss(trend->first_loss)},
                       {"last_loss", loss(trend->last_loss)},
                       {"points", trend->points},
                       {"non_finite", trend->non_finite},
                       {"buckets", buckets},
                       {"sparkline", trend->sparkline}};
  }
  return j;
}

void print_run_dir(std::ostream& out, const nlohmann::json& d, const std::string& indent) {
  out << indent << "attempts:   " << d["attempts"].get<size_t>() << " ("
      << d["restarts"].get<int64_t>() << " restarts)\n";
  if (d.contains("last_attempt")) {
    const auto& a = d["last_attempt"];
    out << indent << "last:       " << a["reason"].get<std::string>() << ", exit status "
        << a["exit_status"].get<int64_t>() << ", " << a["start"].get<std::string>() << " .. "
        << a["end"].get<std::string>() << " on " << a["nodes"].get<std::string>() << '\n';
  }
  if (!d["node_losses"].empty()) {
    out << indent << "node losses: " << d["node_losses"].size()
        << " (recovered in the allocation: " << d["node_losses_recovered"].get<size_t>() << ")\n";
    for (const auto& e : d["node_losses"]) {
      out << indent << "node lost:  " << node_loss_text(e) << '\n';
    }
  }
  out << indent << "checkpoint: " << checkpoint_text(d) << '\n';
  // The latest training and evaluation figures, as a person reads them; the raw last line when
  // the file holds neither kind.
  if (d.contains("last_train")) {
    const auto& m = d["last_train"];
    out << indent << "train:      step " << number(m, "step", 0, 1) << ", epoch "
        << number(m, "epoch", 0, 1) << ", loss " << number(m, "loss", 4, 1) << ", lr "
        << number(m, "lr", -5, 1) << ", " << number(m, "images_per_s", 0, 1) << " images/s"
        << window_text(m) << ", loss scale " << number(m, "loss_scale", -6, 1) << '\n';
  }
  if (d.contains("loss_trend"))
    out << indent << "trend:      " << trend_text(d["loss_trend"]) << '\n';
  if (d.contains("last_ranks")) {
    if (const auto line = ranks_text(d["last_ranks"]))
      out << indent << "ranks:      " << *line << '\n';
  }
  if (d.contains("last_eval")) {
    const auto& m = d["last_eval"];
    out << indent << "eval:       step " << number(m, "step", 0, 1) << ", epoch "
        << number(m, "epoch", 0, 1) << ", top-1 " << number(m, "top1", 2, 100) << "%, top-5 "
        << number(m, "top5", 2, 100) << "%, loss " << number(m, "loss", 4, 1) << " ("
        << number(m, "samples", 0, 1) << " images)\n";
  }
  if (d.contains("last_metrics") && !d.contains("last_train") && !d.contains("last_eval")) {
    out << indent << "metrics:    " << d["last_metrics"].dump() << '\n';
  }
}

nlohmann::json status_report(const fs::path& dir, const std::optional<Submission>& submission,
                             const std::vector<slurm::JobState>& states,
                             const std::string& slurm_error) {
  nlohmann::json out;
  out["run_dir"] = fs::absolute(dir).lexically_normal().string();
  out["job_id"] = submission ? nlohmann::json(submission->job_id) : nlohmann::json(nullptr);
  if (submission) out["submitted_at"] = submission->submitted_at;
  out["slurm"] = nlohmann::json::array();
  for (const auto& s : states) {
    out["slurm"].push_back({{"job_id", s.job_id},
                            {"state", s.state},
                            {"reason", s.reason},
                            {"nodes", s.nodes},
                            {"source", s.source}});
  }
  if (!slurm_error.empty()) out["slurm_error"] = slurm_error;
  if (submission && submission->array_tasks > 0) {
    out["tasks"] = nlohmann::json::array();
    for (size_t t = 0; t < submission->array_tasks; ++t) {
      auto d = describe_run_dir(dir / layout::task_dir_name(t));
      d["task"] = t;
      out["tasks"].push_back(d);
    }
  } else {
    out.update(describe_run_dir(dir));
  }
  return out;
}

void print_status(std::ostream& out, const nlohmann::json& report) {
  out << "run:        " << report["run_dir"].get<std::string>() << '\n';
  if (report["job_id"].is_null()) {
    out << "job:        not submitted\n";
  } else {
    out << "job:        " << report["job_id"].get<std::string>() << " (submitted "
        << report["submitted_at"].get<std::string>() << ")\n";
    if (report["slurm"].empty()) {
      out << "slurm:      "
          << (report.contains("slurm_error")
                  ? "unavailable: " + report["slurm_error"].get<std::string>()
                  : "unknown to squeue and sacct (finished and purged, or accounting off); see "
                    "the attempts below")
          << '\n';
    }
    for (const auto& s : report["slurm"]) {
      out << "slurm:      " << s["job_id"].get<std::string>() << ' '
          << s["state"].get<std::string>();
      const auto reason = s["reason"].get<std::string>();
      if (!reason.empty() && reason != "None") out << " (" << reason << ')';
      out << " [" << s["source"].get<std::string>() << "]\n";
    }
  }
  if (report.contains("tasks")) {
    for (const auto& t : report["tasks"]) {
      out << "task " << t["task"].get<size_t>() << ":\n";
      print_run_dir(out, t, "  ");
    }
  } else {
    print_run_dir(out, report, "");
  }
}

}  // namespace hpctrain::run
