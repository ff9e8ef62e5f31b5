#include "run/status.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/time.hpp"
#include "run/run_dir.hpp"
#include "run/trend.hpp"

namespace hpctrain::run {
namespace {

namespace fs = std::filesystem;
namespace F = records::field;

// The node losses of the ledger, one object each: what was lost and added, when and how it was
// detected, how long stopping and recovering took, and how the run went on ("replaced": a spare
// took the lost node's place; "shrank": the next step ran on fewer ranks; "requeued": the job was
// requeued instead; "chained": the next job of a chain took over, Slurm having refused the
// requeue). "recovered" is whether training went on in the same allocation.
nlohmann::json node_loss_records(const std::vector<records::Attempt>& attempts) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& n : node_losses(attempts)) {
    const auto& a = attempts[n.line];
    out.push_back({{F::kJobId, a.job_id},
                   {F::kRestart, a.restart},
                   {F::kStep, a.srun_step},
                   {F::kReason, records::name_of(a.reason)},
                   {F::kLostNodes, a.lost_nodes},
                   {F::kAddedNodes, a.added_nodes},
                   {F::kDetected, a.detected},
                   {F::kDetectedBy, a.detected_by},
                   {F::kStopS, opt(a.stop_s)},
                   {F::kRecoverS, opt(a.recover_s)},
                   {F::kWorldSize, opt(a.world_size)},
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
  std::string out = e[F::kLostNodes].get<std::string>();
  if (out.empty()) out = "a node";
  const auto detected = e[F::kDetected].get<std::string>();
  // "2026-11-23T23:41:08.412Z": the time of day; anything else as written.
  if (detected.size() >= 19 && detected[10] == 'T') {
    out += " at " + detected.substr(11, 8);
  } else if (!detected.empty()) {
    out += " at " + detected;
  }
  if (!e[F::kDetectedBy].get<std::string>().empty()) {
    out += " (" + e[F::kDetectedBy].get<std::string>() + ")";
  }
  if (e[F::kStopS].is_number()) out += "; survivors stopped in " + seconds(e[F::kStopS]);
  const auto outcome = e["outcome"].get<std::string>();
  if (outcome == "requeued") return out + "; fell back to requeue";
  if (outcome == "chained") return out + "; fell back to the next job of a chain";
  if (outcome == "replaced") {
    out += "; replaced by " + e[F::kAddedNodes].get<std::string>();
  } else if (e["next_world_size"].is_number_integer()) {
    out += "; world shrank to " + std::to_string(e["next_world_size"].get<int64_t>()) + " ranks";
  } else {
    out += "; world shrank";
  }
  if (e[F::kRecoverS].is_number()) {
    out += "; training again after " + seconds(e[F::kRecoverS]);
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
// missing or not finite (the worker writes such a number as null).
std::string number(const nlohmann::json& m, const char* key, int digits, double scale) {
  if (!m.contains(key) || !m[key].is_number() || !std::isfinite(m[key].get<double>())) return "?";
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
  if (m.contains(F::kWindowFirstStep) && m[F::kWindowFirstStep].is_number() &&
      m.contains(F::kStep) && m[F::kStep].is_number()) {
    return " (steps " + number(m, F::kWindowFirstStep, 0, 1) + "-" + number(m, F::kStep, 0, 1) +
           ")";
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
    const bool finite = v.is_number() && std::isfinite(v.get<double>());
    std::snprintf(buf, sizeof buf, "%.1f ms", finite ? 1000 * v.get<double>() : 0.0);
    return std::string(buf);
  };
  const auto slowest = m.value(F::kSlowestRank, nlohmann::json());
  const auto p50 = m.value(F::kBusyP50, nlohmann::json::array());
  const auto p95 = m.value(F::kBusyP95, nlohmann::json::array());
  if (!slowest.is_number_integer() || slowest.get<int64_t>() < 0 ||
      static_cast<size_t>(slowest.get<int64_t>()) >= p50.size() || p50.size() != p95.size()) {
    return std::nullopt;
  }
  const auto r = static_cast<size_t>(slowest.get<int64_t>());
  const auto host = m.value(F::kSlowestHost, nlohmann::json());
  const double median = m.value(F::kMedianBusy, 0.0);
  std::string out = "slowest rank " + std::to_string(r) +
                    (host.is_string() ? " (" + host.get<std::string>() + ")" : std::string()) +
                    ", busy " + ms(p50[r]) + " a step (p50; p95 " + ms(p95[r]) +
                    "), the median rank " + ms(median);
  if (median > 0) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, " (%.1fx)", p50[r].get<double>() / median);
    out += ratio;
  }
  return out + ", at step " + number(m, F::kStep, 0, 1);
}

// A duration as the goodput line gives it: "4.2s", "42s", "3m10s", "1h02m".
std::string duration_text(double seconds) {
  char buf[48];
  if (seconds < 9.95) {
    std::snprintf(buf, sizeof buf, "%.1fs", std::max(seconds, 0.0));
  } else if (seconds < 59.5) {
    std::snprintf(buf, sizeof buf, "%.0fs", seconds);
  } else if (seconds < 3600) {
    const auto s = static_cast<int64_t>(std::llround(seconds));
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    const auto m = static_cast<int64_t>(std::llround(seconds / 60));
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(m / 60),
                  static_cast<long long>(m % 60));
  }
  return buf;
}

// A part's key without its "_s": the key of its hours ("queue_wait").
std::string hours_key(GoodputPart p) {
  const std::string_view key = goodput_key(p);
  return std::string(key.substr(0, key.size() - 2));
}

nlohmann::json parts_json(const GoodputParts& parts) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < kGoodputParts; ++i) {
    out[std::string(goodput_key(static_cast<GoodputPart>(i)))] = parts.seconds[i];
  }
  return out;
}

// The run's job as Slurm knows it, for `job_id` ("123", or "123_4" for an array task): whether
// it goes on (pending, running, requeued: any state but a final one) and, while it runs, when its
// attempt started.
GoodputClock slurm_clock(const std::vector<slurm::JobState>& states, const std::string& job_id,
                         bool slurm_answered) {
  GoodputClock clock;
  const slurm::JobState* job = nullptr;
  for (const auto& s : states) {
    if (s.job_id == job_id) job = &s;
  }
  if (!slurm_answered) {
    clock.active = true;  // unknown: the ledger decides (a final line ends the run)
  } else if (job) {
    clock.active = !job->state.empty() && !slurm::is_terminal_state(job->state);
    if (job->state == "RUNNING" || job->state == "COMPLETING") {
      clock.running_since = slurm::parse_slurm_time(job->start);
    }
  }
  return clock;
}

}  // namespace

std::optional<Goodput> run_goodput(const Snapshot& snapshot,
                                   const std::vector<slurm::JobState>& states,
                                   const std::string& job_id, bool slurm_answered, double now) {
  GoodputClock clock = slurm_clock(states, job_id, slurm_answered);
  clock.now = now;
  if (!snapshot.chain.empty()) clock.submitted = parse_utc(snapshot.chain.front().submitted_at);
  if (snapshot.spec) {
    clock.nodes = snapshot.spec->job.nodes + snapshot.spec->resilience.spare_nodes;
    clock.gpus_per_node = snapshot.spec->job.gpus_per_node;
  }
  return compute_goodput(snapshot.attempts, snapshot.metrics.records, clock);
}

nlohmann::json goodput_json(const Goodput& g) {
  nlohmann::json out = parts_json(g.parts);
  out["wall_s"] = g.wall_s;
  out["fraction"] = g.fraction();
  out["ongoing"] = g.ongoing;
  out["begin"] = utc_ms(std::llround(g.begin * 1000));
  out["end"] = utc_ms(std::llround(g.end * 1000));
  out["nodes"] = g.nodes > 0 ? nlohmann::json(g.nodes) : nlohmann::json(nullptr);
  out["gpus_per_node"] = g.gpus_per_node;
  // Node-hours (GPU-hours: times the GPUs per node) of the allocation, by part; queue wait holds
  // none.
  const auto hours = [&g](double per_node) {
    nlohmann::json h = {{"total", g.node_hours() * per_node}};
    for (size_t i = 0; i < kGoodputParts; ++i) {
      const auto p = static_cast<GoodputPart>(i);
      h[hours_key(p)] = g.node_hours(p) * per_node;
    }
    return h;
  };
  out["node_hours"] = g.nodes > 0 ? hours(1) : nlohmann::json(nullptr);
  out["gpu_hours"] = g.nodes > 0 && g.gpus_per_node > 0
                         ? hours(static_cast<double>(g.gpus_per_node))
                         : nlohmann::json(nullptr);
  out["attempts"] = nlohmann::json::array();
  for (const auto& step : g.steps) {
    nlohmann::json a = parts_json(step.parts);
    a[F::kJobId] = step.job_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(step.job_id);
    a[F::kRestart] = step.restart;
    a[F::kStep] = step.srun_step;
    a[F::kReason] =
        step.reason ? nlohmann::json(records::name_of(*step.reason)) : nlohmann::json(nullptr);
    a["pending"] = step.pending;
    out["attempts"].push_back(a);
  }
  return out;
}

std::string goodput_percent(const nlohmann::json& g) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * g["fraction"].get<double>());
  return std::string(buf) + (g["ongoing"].get<bool>() ? " so far" : "");
}

std::string goodput_text(const nlohmann::json& g) {
  const auto seconds = [&g](GoodputPart p) { return g[std::string(goodput_key(p))].get<double>(); };
  std::string out = goodput_percent(g) + ": " + std::string(goodput_word(GoodputPart::kTraining)) +
                    " " + duration_text(seconds(GoodputPart::kTraining)) + " of " +
                    duration_text(g["wall_s"].get<double>());
  // The other parts, those that took any time.
  std::string rest;
  for (size_t i = 0; i < kGoodputParts; ++i) {
    const auto p = static_cast<GoodputPart>(i);
    if (p == GoodputPart::kTraining || seconds(p) < 0.05) continue;
    rest +=
        (rest.empty() ? "" : ", ") + std::string(goodput_word(p)) + " " + duration_text(seconds(p));
  }
  if (!rest.empty()) out += "; " + rest;
  char buf[96];
  if (g["node_hours"].is_object()) {
    std::snprintf(buf, sizeof buf, "; %.3g node-hours", g["node_hours"]["total"].get<double>());
    out += buf;
    if (g["gpu_hours"].is_object()) {
      std::snprintf(buf, sizeof buf, " (%.3g GPU-hours)", g["gpu_hours"]["total"].get<double>());
      out += buf;
    }
  }
  return out;
}

nlohmann::json describe_run_dir(const Snapshot& s) {
  nlohmann::json j;
  const auto& attempts = s.attempts;
  // Job attempts, not ledger lines: a job attempt that lost a node and went on in its allocation
  // wrote a line per srun step.
  j["attempts"] = records::count_job_attempts(attempts);
  j["restarts"] = restarts(attempts);
  j["chained"] = chained_attempts(attempts);
  if (s.malformed_attempts) j["malformed_ledger_lines"] = s.malformed_attempts;
  if (!attempts.empty()) {
    const auto& a = attempts.back();
    j["last_attempt"] = {
        {F::kJobId, a.job_id},
        {F::kRestart, a.restart},
        {F::kStep, a.srun_step},
        {F::kNodes, a.nodes},
        {F::kStart, a.start},
        {F::kEnd, a.end},
        {F::kExitStatus, a.exit_status},
        {F::kReason, records::name_of(a.reason)},
        {F::kCause, a.cause ? nlohmann::json(records::name_of(*a.cause)) : nlohmann::json(nullptr)},
        {F::kEvidence, a.evidence}};
  }
  j["node_losses"] = node_loss_records(attempts);
  size_t recovered = 0;
  for (const auto& e : j["node_losses"]) recovered += e["recovered"].get<bool>() ? 1 : 0;
  j["node_losses_recovered"] = recovered;
  if (s.checkpoint_step) {
    j["last_checkpoint_step"] = *s.checkpoint_step;
    if (s.checkpoint_age_s) j["last_checkpoint_age_s"] = *s.checkpoint_age_s;
  } else {
    j["last_checkpoint_step"] = nullptr;
  }
  const auto& m = s.metrics;
  if (m.last_line) {
    // The last line as written, whatever its kind; shown when there is no train or eval line.
    const auto parsed = nlohmann::json::parse(*m.last_line, nullptr, /*allow_exceptions=*/false);
    j["last_metrics"] = parsed.is_discarded() ? nlohmann::json(*m.last_line) : parsed;
  }
  if (const auto* t = records::last_of<records::TrainRecord>(m.records)) {
    j["last_train"] = records::to_json(*t);
  }
  if (const auto* e = records::last_of<records::EvalRecord>(m.records)) {
    j["last_eval"] = records::to_json(*e);
  }
  if (const auto* r = records::last_of<records::RanksRecord>(m.records)) {
    j["last_ranks"] = records::to_json(*r);
  }
  // The divergence guard's rollbacks, each line (docs/resilience.md).
  nlohmann::json rollbacks = nlohmann::json::array();
  for (const auto& record : m.records) {
    if (const auto* r = std::get_if<records::RollbackRecord>(&record)) {
      rollbacks.push_back(records::to_json(*r));
    }
  }
  j["rollbacks"] = rollbacks;
  if (!s.provenance.is_null()) j["provenance"] = s.provenance;
  if (!s.tracking.is_null()) j["tracking"] = s.tracking;
  if (const auto trend = loss_trend(m.records)) {
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

namespace {

// "hpctrain-worker sha256 3f2a9c1b4e5d (job 4711's); 1 change let through since": the worker
// binary the run's first attempt recorded.
std::optional<std::string> provenance_text(const nlohmann::json& d) {
  if (!d.contains("provenance")) return std::nullopt;
  const auto& p = d["provenance"];
  const auto first = p.value("first", nlohmann::json::object());
  if (!first.is_object()) return std::nullopt;
  const std::string sha = first.value("sha256", std::string());
  std::string line = first.value("path", std::string("?")) + " sha256 " + sha.substr(0, 12) +
                     " (the first attempt's, job " + first.value("job_id", std::string("?")) + ")";
  const auto changes = p.value("changes", nlohmann::json::array());
  if (changes.is_array() && !changes.empty()) {
    line += "; " + std::to_string(changes.size()) + " change" + (changes.size() == 1 ? "" : "s") +
            " let through since (resilience.require_same_binary = false)";
  }
  return line;
}

// "mlflow run 5f3c... at http://host:5000, through step 400, RUNNING (pushed 2026-...)"; or the
// last push's failure.
std::optional<std::string> tracking_text(const nlohmann::json& d) {
  if (!d.contains("tracking")) return std::nullopt;
  const auto& t = d["tracking"];
  const std::string run = t.value("run_id", std::string());
  std::string line = run.empty() ? std::string("no MLflow run yet")
                                 : "mlflow run " + run + " (experiment " +
                                       t.value("experiment", std::string("?")) + ")";
  line += " at " + t.value("mlflow_uri", std::string("?"));
  if (t.contains("through_step") && t["through_step"].is_number_integer()) {
    line += ", through step " + std::to_string(t["through_step"].get<int64_t>());
  }
  if (const std::string status = t.value("status", std::string()); !status.empty()) {
    line += ", " + status;
  }
  if (const std::string at = t.value("pushed_at", std::string()); !at.empty()) {
    line += " (pushed " + at + ")";
  }
  if (const std::string error = t.value("error", std::string()); !error.empty()) {
    line += "; the last push failed at " + t.value("error_at", std::string("?")) + ": " + error;
  }
  return line;
}

}  // namespace

void print_run_dir(std::ostream& out, const nlohmann::json& d, const std::string& indent) {
  out << indent << "attempts:   " << d["attempts"].get<size_t>() << " ("
      << d["restarts"].get<int64_t>() << " restarts";
  // A chained attempt is no requeue: say how many restarts were a chain's next job.
  if (const auto chained = d.value("chained", size_t{0}); chained > 0) {
    out << ", " << chained << " of them by a chain";
  }
  out << ")\n";
  if (d.contains("last_attempt")) {
    const auto& a = d["last_attempt"];
    out << indent << "last:       " << a[F::kReason].get<std::string>();
    if (a.contains(F::kCause) && a[F::kCause].is_string()) {
      out << " (" << a[F::kCause].get<std::string>() << ")";
    }
    out << ", exit status " << a[F::kExitStatus].get<int64_t>() << ", "
        << a[F::kStart].get<std::string>() << " .. " << a[F::kEnd].get<std::string>() << " on "
        << a[F::kNodes].get<std::string>() << '\n';
    // Why, in the words that decided it (the line of output, or Slurm's state).
    if (a.contains(F::kEvidence) && !a[F::kEvidence].get<std::string>().empty()) {
      out << indent << "why:        " << a[F::kEvidence].get<std::string>() << '\n';
    }
  }
  if (!d["node_losses"].empty()) {
    out << indent << "node losses: " << d["node_losses"].size()
        << " (recovered in the allocation: " << d["node_losses_recovered"].get<size_t>() << ")\n";
    for (const auto& e : d["node_losses"]) {
      out << indent << "node lost:  " << node_loss_text(e) << '\n';
    }
  }
  if (d.contains("rollbacks") && !d["rollbacks"].empty()) {
    // "rollbacks:  2 (the last at step 52: back to the checkpoint of step 45, 224 samples skipped)"
    const auto& last = d["rollbacks"].back();
    out << indent << "rollbacks:  " << d["rollbacks"].size() << " (the last at step "
        << last.value(F::kStep, int64_t{0}) << ": back to the checkpoint of step "
        << last.value(F::kRolledBackTo, int64_t{0}) << ", "
        << last.value(F::kSamplesSkipped, int64_t{0}) << " samples skipped; "
        << last.value(F::kMessage, std::string()) << ")\n";
  }
  out << indent << "checkpoint: " << checkpoint_text(d) << '\n';
  if (const auto line = provenance_text(d)) out << indent << "binary:     " << *line << '\n';
  if (const auto line = tracking_text(d)) out << indent << "tracking:   " << *line << '\n';
  // The latest training and evaluation figures, as a person reads them; the raw last line when
  // the file holds neither kind.
  if (d.contains("last_train")) {
    const auto& m = d["last_train"];
    out << indent << "train:      step " << number(m, F::kStep, 0, 1) << ", epoch "
        << number(m, F::kEpoch, 0, 1) << ", loss " << number(m, F::kLoss, 4, 1) << ", lr "
        << number(m, F::kLr, -5, 1) << ", " << number(m, F::kImagesPerS, 0, 1) << " images/s"
        << window_text(m) << ", loss scale " << number(m, F::kLossScale, -6, 1) << '\n';
  }
  if (d.contains("loss_trend"))
    out << indent << "trend:      " << trend_text(d["loss_trend"]) << '\n';
  if (d.contains("last_ranks")) {
    if (const auto line = ranks_text(d["last_ranks"]))
      out << indent << "ranks:      " << *line << '\n';
  }
  if (d.contains("last_eval")) {
    const auto& m = d["last_eval"];
    out << indent << "eval:       step " << number(m, F::kStep, 0, 1) << ", epoch "
        << number(m, F::kEpoch, 0, 1) << ", top-1 " << number(m, F::kTop1, 2, 100) << "%, top-5 "
        << number(m, F::kTop5, 2, 100) << "%, loss " << number(m, F::kLoss, 4, 1) << " ("
        << number(m, F::kSamples, 0, 1) << " images)\n";
  }
  if (d.contains("last_metrics") && !d.contains("last_train") && !d.contains("last_eval")) {
    out << indent << "metrics:    " << d["last_metrics"].dump() << '\n';
  }
  if (d.contains("goodput")) out << indent << "goodput " << goodput_text(d["goodput"]) << '\n';
}

nlohmann::json status_report(const Snapshot& snapshot, const std::vector<slurm::JobState>& states,
                             const std::string& slurm_error, std::optional<double> now) {
  const double at = now.value_or(unix_time());
  const bool answered = slurm_error.empty();
  const auto& submission = snapshot.submission;
  nlohmann::json out;
  out["run_dir"] = fs::absolute(snapshot.dir).lexically_normal().string();
  out["job_id"] = submission ? nlohmann::json(submission->job_id) : nlohmann::json(nullptr);
  if (submission) {
    out["submitted_at"] = submission->submitted_at;
    out["chain"] = job_ids(snapshot.chain);
  }
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
    for (const auto& task : snapshot.tasks) {
      auto d = describe_run_dir(task);
      d["task"] = *task.task;
      const std::string id = submission->job_id + "_" + std::to_string(*task.task);
      if (const auto g = run_goodput(task, states, id, answered, at))
        d["goodput"] = goodput_json(*g);
      out["tasks"].push_back(d);
    }
  } else {
    out.update(describe_run_dir(snapshot));
    if (submission) {
      if (const auto g = run_goodput(snapshot, states, submission->job_id, answered, at)) {
        out["goodput"] = goodput_json(*g);
      }
    }
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
    // A chain (Slurm refused the requeue): every job of it, the one above last.
    if (report.contains("chain") && report["chain"].size() > 1) {
      std::string jobs;
      for (const auto& id : report["chain"])
        jobs += (jobs.empty() ? "" : " -> ") + id.get<std::string>();
      out << "chain:      " << jobs << " (each job continued the one before: Slurm refused the "
          << "requeue)\n";
    }
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
