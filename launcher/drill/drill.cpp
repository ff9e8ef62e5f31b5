#include "drill/drill.hpp"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "common/records.hpp"

namespace hpctrain::drill {
namespace fs = std::filesystem;
namespace {

constexpr Event kAll[] = {Event::kPreempt, Event::kRequeue, Event::kHang, Event::kKillNode};

}  // namespace

bool ends_run(records::Reason reason) {
  using records::Reason;
  switch (reason) {
    case Reason::kCompleted:
    case Reason::kRestartLimit:
    case Reason::kFailed:
    case Reason::kSetupFailed:
    case Reason::kNoProgress:
      return true;
    default:
      return false;
  }
}

namespace {

// "requeued (preempted)", with the next job of a chain where the line is a chained one.
std::string said(const records::Attempt& a, const std::vector<records::Submission>& chain) {
  using records::Reason;
  std::string out(records::name_of(a.reason));
  const bool chained = a.reason == Reason::kChained || a.reason == Reason::kFailedChained ||
                       a.reason == Reason::kNodeLostChained;
  for (const auto& s : chain) {
    if (chained && s.chained_from == a.job_id) out += " to job " + s.job_id;
  }
  if (a.cause) out += " (" + std::string(records::name_of(*a.cause)) + ")";
  if (!a.lost_nodes.empty()) out += ", node " + a.lost_nodes + " replaced";
  if (!a.excluded.empty()) out += ", " + a.excluded + " excluded";
  return out;
}

}  // namespace

std::string_view name_of(Event event) {
  switch (event) {
    case Event::kPreempt:
      return "preempt";
    case Event::kRequeue:
      return "requeue";
    case Event::kHang:
      return "hang";
    case Event::kKillNode:
      return "kill-node";
  }
  return "?";
}

std::string_view title_of(Event event) {
  switch (event) {
    case Event::kPreempt:
      return "preemption notice";
    case Event::kRequeue:
      return "requeue";
    case Event::kHang:
      return "rank stops answering";
    case Event::kKillNode:
      return "killed node";
  }
  return "?";
}

std::vector<Event> parse_events(const std::string& list) {
  std::vector<Event> out;
  std::stringstream in(list);
  std::string word;
  while (std::getline(in, word, ',')) {
    if (word.empty()) continue;
    const auto* it =
        std::find_if(std::begin(kAll), std::end(kAll), [&](Event e) { return name_of(e) == word; });
    if (it == std::end(kAll)) {
      throw std::invalid_argument("--events: no event '" + word +
                                  "' (the events: preempt, requeue, hang, kill-node)");
    }
    out.push_back(*it);
  }
  if (out.empty()) throw std::invalid_argument("--events: no event given");
  return out;
}

std::vector<Event> default_events(const spec::Spec& spec) {
  std::vector<Event> events = {Event::kPreempt, Event::kRequeue, Event::kHang};
  if (spec.resilience.spare_nodes > 0) events.push_back(Event::kKillNode);
  return events;
}

std::vector<std::string> drill_overrides(const std::string& name, const fs::path& dir,
                                         const Options& options) {
  const int64_t every = std::max<int64_t>(1, options.steps / 8);
  return {"job.name=" + name,          "job.run_dir=" + dir.string(),
          "job.time=" + options.time,  "train.max_steps=" + std::to_string(options.steps),
          "train.eval_every_epochs=0", "checkpoint.every_steps=" + std::to_string(every),
          "checkpoint.every_minutes=0"};
}

Readiness readiness(const spec::Spec& spec, std::optional<bool> requeue_allowed,
                    const std::string& job_id) {
  Readiness r;
  if (!spec.preemption.enabled) {
    r.problem =
        "preemption.enabled is false: the job is submitted --no-requeue and a preempted or "
        "requeued attempt is not resumed; set preemption.enabled = true";
    return r;
  }
  if (requeue_allowed.value_or(true)) return r;
  const std::string refused = "Slurm will not requeue job " + job_id +
                              " (scontrol show job: Requeue=0; JobRequeue=0 in slurm.conf or a "
                              "site policy)";
  if (spec.preemption.chain) {
    r.note = refused + ": the run goes on by a job chain (preemption.chain = true)";
  } else {
    r.problem = refused +
                ", and preemption.chain is false: a preempted run would end there; "
                "set preemption.chain = true";
  }
  return r;
}

Outcome outcome(const run::Snapshot& snapshot, size_t ledger_before, double played_at) {
  Outcome o;
  std::vector<std::string> lines;
  for (size_t i = ledger_before; i < snapshot.attempts.size(); ++i) {
    const auto& a = snapshot.attempts[i];
    lines.push_back(said(a, snapshot.chain));
    if (ends_run(a.reason)) o.ended = true;
  }
  for (size_t i = 0; i < lines.size(); ++i) o.did += (i ? "; " : "") + lines[i];
  for (const auto& record : snapshot.metrics.records) {
    const auto* started = std::get_if<records::StartedRecord>(&record);
    if (!started || !started->wall_time || *started->wall_time <= played_at) continue;
    o.resumed = true;
    o.resumed_from = started->resumed_from;
    o.recovery_s = *started->wall_time - played_at;
    o.ended = false;
    break;
  }
  return o;
}

int64_t newest_step(const run::Snapshot& snapshot) {
  int64_t step = snapshot.checkpoint_step.value_or(0);
  for (const auto& record : snapshot.metrics.records) {
    if (const auto* t = std::get_if<records::TrainRecord>(&record)) step = std::max(step, t->step);
  }
  return step;
}

std::optional<int64_t> unheeded_until(const run::Snapshot& snapshot, size_t ledger_before,
                                      double played_at, int64_t step_at_play, int64_t steps_past) {
  // A new line other than the run's completion: something ended the attempt (the notice did, or
  // a failure did); outcome() says which.
  for (size_t i = ledger_before; i < snapshot.attempts.size(); ++i) {
    if (snapshot.attempts[i].reason != records::Reason::kCompleted) return std::nullopt;
  }
  int64_t reached = snapshot.checkpoint_step.value_or(0);
  for (const auto& record : snapshot.metrics.records) {
    const auto* t = std::get_if<records::TrainRecord>(&record);
    if (t && t->wall_time && *t->wall_time > played_at) reached = std::max(reached, t->step);
  }
  const bool completed = snapshot.attempts.size() > ledger_before;
  if (completed || reached >= step_at_play + steps_past) return reached;
  return std::nullopt;
}

std::string unheeded_text(std::string_view signal, int64_t from, int64_t to) {
  return "the preemption signal (SIG" + std::string(signal) +
         ") reached no worker: training went on from step " + std::to_string(from) + " to step " +
         std::to_string(to) +
         " without stopping. Something between Slurm and hpctrain-worker does not pass it on: a "
         "container runtime or wrapper that runs the worker in a process group or session of "
         "its own (run it with exec, or have it forward the signal), or preemption.signal is "
         "not the signal this cluster sends (docs/resilience.md#a-drill-before-the-long-run)";
}

std::set<std::string> final_fingerprints(const fs::path& run_dir) {
  static const std::regex kFinal("final weights fnv1a64 (0x[0-9a-f]+)");
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(run_dir / "logs", ec)) {
    if (entry.path().extension() != ".err") continue;
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, kFinal)) out.insert(m[1]);
    }
  }
  return out;
}

std::string table(const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> cells = {
      {"", "event", "played at", "what happened", "resumed", "recovery"}};
  for (const auto& r : rows) {
    cells.push_back({r.ok ? "" : "FAILED", r.event, r.at, r.did, r.resumed, r.recovery});
  }
  std::vector<size_t> width(cells.front().size(), 0);
  for (const auto& line : cells) {
    for (size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  }
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c) {
      if (width[c] == 0) continue;
      text += line[c] + std::string(width[c] - line[c].size() + 2, ' ');
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out += text + "\n";
  }
  return out;
}

}  // namespace hpctrain::drill
