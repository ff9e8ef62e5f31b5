#include "run/goodput.hpp"

#include <algorithm>
#include <variant>

#include "common/time.hpp"

namespace hpctrain::run {
namespace {

using records::Attempt;
using records::MetricsRecord;
using P = GoodputPart;

constexpr std::array<std::string_view, kGoodputParts> kKeys = {
    "queue_wait_s",       "startup_s",   "training_s", "evaluation_s",
    "checkpoint_stall_s", "work_lost_s", "recovery_s", "idle_end_s"};
constexpr std::array<std::string_view, kGoodputParts> kWords = {
    "queue", "start-up", "training", "eval", "checkpoint", "lost", "recovery", "idle"};

// A step count reached at a wall time: a started, train or eval line.
struct Progress {
  int64_t step = 0;
  double wall_time = 0;
};

// One srun step as the records tell it: its ledger line (none for the attempt running now), its
// start and end, and the metrics lines its worker wrote.
struct Segment {
  const Attempt* line = nullptr;
  double start = 0, end = 0;
  std::optional<Progress> first;   // the started line: the first training step
  std::vector<Progress> progress;  // train lines, in order
  double last_progress = 0;        // the latest wall time of a started, train or eval line
  std::vector<std::pair<double, double>> evals;   // (wall_time, seconds), the pass ending then
  std::vector<std::pair<double, double>> stalls;  // (wall_time, checkpoint seconds) of train lines
};

// The metrics lines from one started line to the next: one worker process's.
struct Run {
  const records::StartedRecord* started = nullptr;
  std::vector<const MetricsRecord*> lines;
};

std::vector<Run> split_runs(const std::vector<MetricsRecord>& metrics) {
  std::vector<Run> runs;
  for (const auto& m : metrics) {
    if (const auto* s = std::get_if<records::StartedRecord>(&m)) {
      if (s->wall_time) runs.push_back({s, {}});
    } else if (!runs.empty()) {
      runs.back().lines.push_back(&m);
    }
  }
  return runs;
}

// Whether `run` is the worker of ledger line `a`: its tag ("RESTART.STEP") names the line's srun
// step, or, without a tag, its first step fell between the line's start and end.
bool belongs(const Run& run, const Attempt& a, double start, double end) {
  if (run.started->tag) {
    return *run.started->tag == std::to_string(a.restart) + "." + std::to_string(a.srun_step);
  }
  // The ledger's times are whole seconds, truncated: a second of slack at the end.
  const double t = *run.started->wall_time;
  return t >= start && t <= end + 1;
}

void take(Segment& seg, const Run& run) {
  seg.first = Progress{run.started->step, *run.started->wall_time};
  seg.last_progress = seg.first->wall_time;
  for (const MetricsRecord* m : run.lines) {
    if (const auto* t = std::get_if<records::TrainRecord>(m); t && t->wall_time) {
      seg.progress.push_back({t->step, *t->wall_time});
      seg.last_progress = std::max(seg.last_progress, *t->wall_time);
      if (t->checkpoint_seconds && *t->checkpoint_seconds > 0) {
        seg.stalls.emplace_back(*t->wall_time, *t->checkpoint_seconds);
      }
    } else if (const auto* e = std::get_if<records::EvalRecord>(m); e && e->wall_time) {
      seg.last_progress = std::max(seg.last_progress, *e->wall_time);
      if (e->seconds && *e->seconds > 0) seg.evals.emplace_back(*e->wall_time, *e->seconds);
    }
  }
}

// A step none of whose lines follow a started line (workers before started lines): its train and
// eval lines by their times, its first step where the first train line's window began.
void take_by_time(Segment& seg, const std::vector<MetricsRecord>& metrics) {
  Run run;
  records::StartedRecord first;
  for (const auto& m : metrics) {
    const auto* t = std::get_if<records::TrainRecord>(&m);
    const auto* e = std::get_if<records::EvalRecord>(&m);
    const auto wall = t ? t->wall_time : e ? e->wall_time : std::nullopt;
    // The ledger's times are whole seconds, truncated: a second of slack at the end.
    if (!wall || *wall < seg.start || *wall > seg.end + 1) continue;
    if (!run.started) {
      if (!t) continue;
      first.step = t->window_first_step.value_or(t->step);
      first.wall_time = std::max(seg.start, *wall - t->window_seconds.value_or(0));
      run.started = &first;
    }
    run.lines.push_back(&m);
  }
  if (run.started) take(seg, run);
}

// The wall time at which the segment's worker had computed `step`, by linear interpolation
// between the steps its lines name; its first training step's time for a step at or before it,
// the last line's for one after it.
double time_at_step(const Segment& seg, int64_t step) {
  std::vector<Progress> points = {*seg.first};
  points.insert(points.end(), seg.progress.begin(), seg.progress.end());
  if (step <= points.front().step) return points.front().wall_time;
  for (size_t i = 1; i < points.size(); ++i) {
    const auto& a = points[i - 1];
    const auto& b = points[i];
    if (step <= b.step) {
      if (b.step == a.step) return b.wall_time;
      const double f = static_cast<double>(step - a.step) / static_cast<double>(b.step - a.step);
      return a.wall_time + f * (b.wall_time - a.wall_time);
    }
  }
  return seg.last_progress;
}

// The seconds of `spans` ((end time, seconds) pairs) that fall within [from, to].
double overlap(const std::vector<std::pair<double, double>>& spans, double from, double to) {
  double out = 0;
  for (const auto& [end, seconds] : spans) {
    const double lo = std::max(end - seconds, from);
    const double hi = std::min(end, to);
    if (hi > lo) out += hi - lo;
  }
  return out;
}

}  // namespace

std::string_view goodput_key(GoodputPart part) { return kKeys[static_cast<size_t>(part)]; }
std::string_view goodput_word(GoodputPart part) { return kWords[static_cast<size_t>(part)]; }

double GoodputParts::total() const {
  double out = 0;
  for (double s : seconds) out += s;
  return out;
}

double Goodput::node_hours(GoodputPart p) const {
  // Queue wait holds no allocation.
  if (p == P::kQueueWait) return 0;
  return parts[p] * static_cast<double>(nodes) / 3600;
}

double Goodput::node_hours() const {
  double out = 0;
  for (size_t i = 0; i < kGoodputParts; ++i) out += node_hours(static_cast<GoodputPart>(i));
  return out;
}

namespace {

// The run's srun steps with their workers' lines, and whether the run goes on.
struct Segments {
  std::vector<Segment> list;
  bool active = false;
};

// The segments: one per ledger line with readable times, in ledger order, and the attempt
// running now (Slurm says the run goes on, and it has started).
Segments gather_segments(const std::vector<Attempt>& attempts,
                         const std::vector<MetricsRecord>& metrics, const GoodputClock& clock) {
  std::vector<Segment> segments;
  for (const auto& a : attempts) {
    const auto start = parse_utc(a.start);
    const auto end = parse_utc(a.end);
    if (!start || !end) continue;
    Segment seg;
    seg.line = &a;
    seg.start = *start;
    seg.end = std::max(*start, *end);
    segments.push_back(std::move(seg));
  }
  // Each worker process's lines go to the first ledger line, from the one the previous process
  // matched on, that they belong to; those after every line are the running attempt's.
  const auto runs = split_runs(metrics);
  size_t next = 0;
  std::vector<const Run*> unmatched;
  for (const auto& run : runs) {
    bool matched = false;
    for (size_t i = next; i < segments.size(); ++i) {
      if (belongs(run, *segments[i].line, segments[i].start, segments[i].end)) {
        take(segments[i], run);
        next = i + 1;
        matched = true;
        break;
      }
    }
    if (!matched && (segments.empty() || *run.started->wall_time > segments.back().end)) {
      unmatched.push_back(&run);
    }
  }
  for (auto& seg : segments) {
    if (!seg.first) take_by_time(seg, metrics);
    // The ledger's times are whole seconds, the workers' are not: a worker's last line in the
    // second the ledger's end names is within the attempt (an attempt shorter than a second
    // trained, too).
    if (seg.first) seg.end = std::max(seg.end, std::min(seg.last_progress, seg.end + 1));
  }
  // The ledger's last line ends the run when its reason is final, unless a later attempt shows:
  // Slurm requeued a job whose script it had terminated (scontrol requeue), and it runs again.
  const bool later = !unmatched.empty() || (clock.running_since && !segments.empty() &&
                                            *clock.running_since > segments.back().end);
  const bool over = !attempts.empty() && records::is_final(attempts.back().reason) && !later;
  const bool active = clock.active && !over;
  if (active && (clock.running_since || !unmatched.empty())) {
    Segment seg;
    // Slurm's start; without it, the first step of the process running now.
    seg.start = clock.running_since ? *clock.running_since : *unmatched.front()->started->wall_time;
    if (!segments.empty()) seg.start = std::max(seg.start, segments.back().end);
    seg.end = std::max(seg.start, clock.now);
    if (!unmatched.empty()) take(seg, *unmatched.back());
    segments.push_back(std::move(seg));
  }
  return {std::move(segments), active};
}

// One step's time from its start `s` to its end `e` into `parts`: `trained` says whether the run
// had trained before it, `ends_run` whether it is the last step of a run that is over.
void account_step(const Segment& seg, double s, double e, bool trained, bool ends_run,
                  bool running_now, GoodputParts& parts) {
  if (!seg.first) {
    // No training step: start-up until the run first trains, then recovery; a last step that
    // ends the run without training (it had finished already) is idle at the end.
    parts[!trained ? P::kStartup : ends_run ? P::kIdleEnd : P::kRecovery] += e - s;
    return;
  }
  const double t0 = std::clamp(seg.first->wall_time, s, e);
  // A step running now is training since its last line (the steps in progress).
  const double tl = running_now ? e : std::clamp(seg.last_progress, t0, e);
  // Start -> first step: start-up for the run's first, recovery for a resumed one.
  parts[trained ? P::kRecovery : P::kStartup] += t0 - s;
  // First step -> last line: training, less the evaluations (each eval line's seconds, ending at
  // its wall time) and the checkpoint stalls (each train line's checkpoint_seconds, in the window
  // the line closes) within it; of the training, the part after the time the ledger's last
  // committed checkpoint step was reached is work lost when the step ended without completing the
  // run (the next attempt computes those steps again).
  const double span = tl - t0;
  const double eval = std::min(overlap(seg.evals, t0, tl), span);
  const double stall = std::min(overlap(seg.stalls, t0, tl), span - eval);
  const double train = span - eval - stall;
  double lost = 0;
  if (seg.line && seg.line->reason != records::Reason::kCompleted) {
    const int64_t committed = seg.line->last_step.value_or(-1);
    const double tc = std::clamp(time_at_step(seg, committed), t0, tl);
    lost = (tl - tc) - overlap(seg.evals, tc, tl) - overlap(seg.stalls, tc, tl);
    lost = std::clamp(lost, 0.0, train);
  }
  parts[P::kTraining] += train - lost;
  parts[P::kWorkLost] += lost;
  parts[P::kEvaluation] += eval;
  parts[P::kCheckpointStall] += stall;
  // Last line -> end: the run's end (saving the final weights, exiting) is idle at the end; any
  // other step's is detection and recovery (the steps after its last line, the stop, the exit,
  // the supervisor's decision).
  parts[ends_run ? P::kIdleEnd : P::kRecovery] += e - tl;
}

}  // namespace

std::optional<Goodput> compute_goodput(const std::vector<Attempt>& attempts,
                                       const std::vector<MetricsRecord>& metrics,
                                       const GoodputClock& clock) {
  const auto [segments, active] = gather_segments(attempts, metrics, clock);
  // Nothing to account: no attempt with its times, and no submission to count a wait from.
  if (segments.empty() && !(active && clock.submitted)) return std::nullopt;

  Goodput g;
  g.nodes = clock.nodes;
  g.gpus_per_node = clock.gpus_per_node;
  g.ongoing = active;
  // The wall time runs from the submission (or the first attempt's start, if earlier or the
  // submission is unknown) to the last attempt's end, or to now while the run goes on.
  g.begin = segments.empty() ? clock.submitted.value_or(clock.now) : segments.front().start;
  if (clock.submitted) g.begin = std::min(g.begin, *clock.submitted);
  g.end = active ? std::max(clock.now, segments.empty() ? g.begin : segments.back().end)
                 : segments.back().end;
  g.wall_s = g.end - g.begin;

  // The parts tile [begin, end]: `t` is how far the time has been given out; every interval
  // below starts at it, so nothing is counted twice and nothing is left out.
  double t = g.begin;
  bool trained = false;  // whether the run has taken a training step before `t`
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& seg = segments[i];
    GoodputStep step;
    if (seg.line) {
      step.job_id = seg.line->job_id;
      step.restart = seg.line->restart;
      step.srun_step = seg.line->srun_step;
      step.reason = seg.line->reason;
    }
    GoodputParts& parts = step.parts;
    const double s = std::clamp(seg.start, t, g.end);
    const double e = std::clamp(seg.end, s, g.end);
    // Before the step: queue wait when the step begins a job attempt (the job pending in Slurm:
    // submitted, requeued or the chain's next job submitted); detection and recovery when it
    // follows a step of the same job attempt (a node lost; the allocation held meanwhile).
    const bool same_attempt = i > 0 && seg.line && segments[i - 1].line &&
                              segments[i - 1].line->job_id == seg.line->job_id &&
                              segments[i - 1].line->restart == seg.line->restart;
    parts[same_attempt ? P::kRecovery : P::kQueueWait] += s - t;
    const bool last = i + 1 == segments.size();
    account_step(seg, s, e, trained, last && !active, !seg.line && active, parts);
    if (seg.first) trained = true;
    t = e;
    g.steps.push_back(std::move(step));
  }
  // After the last step, while the run goes on: the job pending in Slurm again (requeued).
  if (g.end > t) {
    GoodputStep pending;
    pending.pending = true;
    pending.parts[P::kQueueWait] = g.end - t;
    g.steps.push_back(pending);
  }
  for (const auto& step : g.steps) {
    for (size_t i = 0; i < kGoodputParts; ++i) g.parts.seconds[i] += step.parts.seconds[i];
  }
  return g;
}

}  // namespace hpctrain::run
