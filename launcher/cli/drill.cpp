// hpctrain drill SPEC: the short version of the spec submitted twice (drill/drill.hpp), the
// events played on one run, each once a checkpoint newer than the last event's is committed, and
// the table. Every wait has a deadline (--timeout per event); on a failed event both jobs are
// cancelled. Exit status 0 when every event was survived and the weights agree, 1 otherwise.
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/common.hpp"
#include "common/time.hpp"
#include "drill/drill.hpp"
#include "run/snapshot.hpp"
#include "slurm/client.hpp"
#include "spec/choices.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;
using drill::Event;
using drill::Row;

// Stops one rank of job $1 on this node: the first hpctrain-worker process (by /proc, no procps
// needed) whose environment has SLURM_JOB_ID=$1 gets SIGSTOP (alive, holding its sockets,
// answering nothing). Prints its pid.
constexpr const char* kStopOneRank =
    "for d in /proc/[0-9]*; do "
    "[ \"$(cat \"$d/comm\" 2>/dev/null)\" = hpctrain-worker ] || continue; "
    "tr '\\0' '\\n' < \"$d/environ\" 2>/dev/null | grep -qx \"SLURM_JOB_ID=$1\" || continue; "
    "kill -STOP \"${d#/proc/}\" && echo \"${d#/proc/}\" && exit 0; done; "
    "echo \"no hpctrain-worker of job $1 on $(hostname)\" >&2; exit 1";

// Succeeds on a node where a rank of job $1 runs (the kill command's target).
constexpr const char* kFindRank =
    "for d in /proc/[0-9]*; do "
    "[ \"$(cat \"$d/comm\" 2>/dev/null)\" = hpctrain-worker ] || continue; "
    "tr '\\0' '\\n' < \"$d/environ\" 2>/dev/null | grep -qx \"SLURM_JOB_ID=$1\" && exit 0; done; "
    "echo \"no hpctrain-worker of job $1 on $(hostname)\" >&2; exit 1";

// Runs the drill's --kill-command by /bin/sh with the node as $1 (never spliced into the text);
// its exit status (128 + the signal when one ended it).
int run_kill_command(const std::string& command, const std::string& node) {
  const pid_t pid = ::fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), "drill", node.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

// Kills every rank of job $1 on this node at once with SIGKILL, as a node's crash ends them (its
// slurmd stays). Prints their pids.
constexpr const char* kKillRanks =
    "n=0; for d in /proc/[0-9]*; do "
    "[ \"$(cat \"$d/comm\" 2>/dev/null)\" = hpctrain-worker ] || continue; "
    "tr '\\0' '\\n' < \"$d/environ\" 2>/dev/null | grep -qx \"SLURM_JOB_ID=$1\" || continue; "
    "kill -KILL \"${d#/proc/}\" && echo \"${d#/proc/}\" && n=$((n + 1)); done; "
    "[ $n -gt 0 ] || { echo \"no hpctrain-worker of job $1 on $(hostname)\" >&2; exit 1; }";

std::string seconds_text(double s) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << s << " s";
  return out.str();
}

// Polls `ready` every 2 s until it holds; false after `seconds`.
template <class Ready>
bool wait_until(int64_t seconds, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  return true;
}

// The disturbed run and the events played on it.
class Drill {
 public:
  Drill(slurm::SlurmClient& slurm, const spec::Spec& spec, fs::path dir, int64_t timeout_s,
        std::string kill_command)
      : slurm_(slurm),
        spec_(spec),
        dir_(std::move(dir)),
        timeout_s_(timeout_s),
        kill_command_(std::move(kill_command)) {}

  Row play(Event event);

 private:
  // The job carrying the run now (the last of its chain).
  std::string job() const {
    const auto s = run::read_snapshot(dir_);
    return s.chain.empty() ? std::string() : s.chain.back().job_id;
  }
  // A checkpoint newer than the last one an event was played on, with training going on since.
  bool ready_for_next(int64_t* step) const;
  // Plays `event`; "" when it was played, else why not.
  std::string act(Event event, const std::string& job_id);
  // Runs `script` (with $1 = the job) inside the job on one of its nodes that runs a worker, the
  // last first (the batch host, which trains last, is usually the first; spares the step does
  // not train on have none); the node it ran on, or nullopt with why not in `why`. With
  // `printed_is_done`, a run that printed a pid counts as done whatever its exit status: killing
  // the ranks ends the step, and the job's requeue may cancel the script's own step before it
  // exits.
  std::optional<std::string> on_a_worker_node(const std::string& job_id, const char* script,
                                              std::string* why, bool printed_is_done = false);

  slurm::SlurmClient& slurm_;
  const spec::Spec& spec_;
  fs::path dir_;
  int64_t timeout_s_;
  std::string kill_command_;  // Options::kill_command
  int64_t last_step_ = 0;     // the checkpoint the last event was played on
  double last_played_ = 0;    // when (unix seconds)
};

bool Drill::ready_for_next(int64_t* step) const {
  const auto s = run::read_snapshot(dir_);
  if (!s.checkpoint_step || *s.checkpoint_step <= last_step_) return false;
  for (const auto& record : s.metrics.records) {
    const auto* started = std::get_if<records::StartedRecord>(&record);
    if (started && started->wall_time && *started->wall_time > last_played_) {
      *step = *s.checkpoint_step;
      return true;
    }
  }
  return false;
}

std::string Drill::act(Event event, const std::string& job_id) {
  switch (event) {
    case Event::kPreempt: {
      const std::string sig(spec::name_of(spec_.preemption.signal));
      std::cerr << "drill: scancel --signal=" << sig << " " << job_id << "\n";
      slurm_.signal(job_id, sig);
      return "";
    }
    case Event::kRequeue:
      std::cerr << "drill: scontrol requeue " << job_id << "\n";
      try {
        slurm_.requeue(job_id);
      } catch (const slurm::SlurmError& e) {
        return e.what();
      }
      return "";
    case Event::kHang: {
      std::string why;
      const auto node = on_a_worker_node(job_id, kStopOneRank, &why);
      if (!node) return "could not stop a rank (" + why + ")";
      std::cerr << "drill: SIGSTOP to a rank of job " << job_id << " on " << *node << "\n";
      return "";
    }
    case Event::kKillNode: {
      if (kill_command_.empty()) {
        std::string why;
        const auto node = on_a_worker_node(job_id, kKillRanks, &why, /*printed_is_done=*/true);
        if (!node) return "could not kill the ranks of a node (" + why + ")";
        std::cerr << "drill: SIGKILL to the ranks of job " << job_id << " on " << *node << "\n";
        return "";
      }
      // The site's command: on the last node that runs a worker, found as the hang event finds
      // it (a harmless script that only looks).
      std::string why;
      const auto node = on_a_worker_node(job_id, kFindRank, &why);
      if (!node) return "found no node running a rank (" + why + ")";
      std::cerr << "drill: " << kill_command_ << " (with $1 = " << *node << ")\n";
      const int status = run_kill_command(kill_command_, *node);
      if (status != 0) {
        return "--kill-command exited " + std::to_string(status) + " for node " + *node;
      }
      return "";
    }
  }
  return "no such event";
}

std::optional<std::string> Drill::on_a_worker_node(const std::string& job_id, const char* script,
                                                   std::string* why, bool printed_is_done) {
  const auto states = slurm_.query(job_id);
  const auto nodes =
      states.empty() ? std::vector<std::string>() : slurm_.hostnames(states.front().nodes);
  if (nodes.empty()) {
    *why = "the nodes of job " + job_id + " are unknown";
    return std::nullopt;
  }
  std::string tried;
  for (auto node = nodes.rbegin(); node != nodes.rend(); ++node) {
    const auto r = slurm_.run_in_job(job_id, *node, {"bash", "-c", script, "drill", job_id});
    const bool printed_pid = r.out.find_first_of("0123456789") != std::string::npos;
    if (r.exit_status == 0 || (printed_is_done && printed_pid)) return *node;
    std::string said = r.err + r.out;
    while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) {
      said.pop_back();
    }
    tried += (tried.empty() ? "" : "; ") + *node + ": " + said;
  }
  *why = tried;
  return std::nullopt;
}

Row Drill::play(Event event) {
  Row row;
  row.event = std::string(drill::title_of(event));
  int64_t step = 0;
  if (!wait_until(timeout_s_, [&] { return ready_for_next(&step); })) {
    row.ok = false;
    row.did = "no new checkpoint within " + std::to_string(timeout_s_) + " s";
    return row;
  }
  row.at = "step " + std::to_string(step);
  const std::string job_id = job();
  const size_t before = run::read_snapshot(dir_).attempts.size();
  const double played_at = unix_time();
  if (const std::string refused = act(event, job_id); !refused.empty()) {
    row.did = "not played: " + refused;
    // A requeue Slurm refuses is the cluster's policy (readiness() said what follows from it).
    row.ok = event == Event::kRequeue && spec_.preemption.chain;
    last_step_ = step;
    return row;
  }
  // Until training came back and the ledger says what was done: a node replaced in the
  // allocation gets its line once the replacement step has trained (the line holds recover_s).
  // A preemption notice no worker heeded shows as training going on well past it.
  const int64_t step_at_play = std::max(step, drill::newest_step(run::read_snapshot(dir_)));
  const int64_t steps_past = 2 * spec_.checkpoint.every_steps + spec_.train.log_every_steps + 2;
  drill::Outcome o;
  std::optional<int64_t> unheeded;
  wait_until(timeout_s_, [&] {
    const auto s = run::read_snapshot(dir_);
    o = drill::outcome(s, before, played_at);
    if (event == Event::kPreempt) {
      unheeded = drill::unheeded_until(s, before, played_at, step_at_play, steps_past);
    }
    return (o.resumed && !o.did.empty()) || o.ended || unheeded;
  });
  if (unheeded && !(o.resumed && !o.did.empty())) {
    row.ok = false;
    row.did = drill::unheeded_text(spec::name_of(spec_.preemption.signal), step_at_play, *unheeded);
    last_step_ = std::max(step, *unheeded);
    last_played_ = played_at;
    return row;
  }
  row.did = o.did.empty() ? "nothing recorded" : o.did;
  row.ok = o.resumed;
  row.resumed = !o.resumed       ? "no"
                : o.resumed_from ? "from step " + std::to_string(*o.resumed_from)
                                 : "from the start";
  if (o.recovery_s) row.recovery = seconds_text(*o.recovery_s);
  if (!o.resumed && !o.ended) row.did += " (nothing resumed within the timeout)";
  last_step_ = std::max(step, o.resumed_from.value_or(step));
  last_played_ = played_at;
  return row;
}

// Whether the run in `dir` has ended: its last ledger line does not go on.
bool ended(const fs::path& dir) {
  const auto s = run::read_snapshot(dir);
  return !s.attempts.empty() && drill::ends_run(s.attempts.back().reason);
}

// The last row: the disturbed run's final weights against the undisturbed run's.
Row weights_row(const fs::path& drilled, const fs::path& reference, int64_t timeout_s) {
  Row row;
  row.event = "final weights";
  const bool both = wait_until(
      timeout_s, [&] { return ended(drilled) && (reference.empty() || ended(reference)); });
  const auto mine = drill::final_fingerprints(drilled);
  const auto theirs = reference.empty() ? mine : drill::final_fingerprints(reference);
  const auto text = [](const std::set<std::string>& f) {
    std::string out;
    for (const auto& x : f) out += (out.empty() ? "" : ",") + x;
    return out.empty() ? std::string("none") : out;
  };
  if (!both) {
    row.ok = false;
    row.did = "the runs did not end within " + std::to_string(timeout_s) + " s";
  } else if (reference.empty()) {
    row.did = "fnv1a64 " + text(mine) + " (no undisturbed run to compare with)";
    row.ok = mine.size() == 1;
  } else {
    row.ok = mine.size() == 1 && mine == theirs;
    row.did = "fnv1a64 " + text(mine) + (row.ok ? " = " : " != ") + "the undisturbed run's " +
              text(theirs);
  }
  return row;
}

spec::Resolved drill_spec(const SpecArgs& base, const std::string& name, const fs::path& dir,
                          const drill::Options& options) {
  SpecArgs args = base;
  for (auto& o : drill::drill_overrides(name, dir, options)) args.overrides.push_back(o);
  return load_or_exit(args, /*check_paths=*/true);
}

// "2026-11-27T22:40:01Z" -> "20261127T224001Z": a folder name for this drill.
std::string stamp() {
  std::string out;
  for (const char c : utc_now()) {
    if (c != '-' && c != ':' && c != '.') out += c;
  }
  return out;
}

void run_drill(const SpecArgs& args, const drill::Options& options, const std::string& dir,
               bool with_reference, int64_t timeout_s) {
  const auto base = load_or_exit(args, /*check_paths=*/true);
  if (!base.tasks.empty()) {
    throw Exit(kExitBadInput, "hpctrain drill: " + args.spec_file +
                                  " is a sweep; drill one of its tasks (--set its parameters)");
  }
  const fs::path root =
      (dir.empty() ? fs::path(base.spec.job.run_dir + "-drill") : fs::path(dir)) / stamp();
  const std::string name = base.spec.job.name;
  const auto drilled_spec = drill_spec(args, name + "-drill", root / "drilled", options);
  const auto drilled = submit_spec(drilled_spec, false);
  std::vector<std::string> jobs = {drilled.job_id};
  fs::path reference;
  if (with_reference) {
    const auto ref =
        submit_spec(drill_spec(args, name + "-drill-ref", root / "reference", options), false);
    jobs.push_back(ref.job_id);
    reference = ref.run_dir;
  }
  auto slurm = slurm::make_command_client();
  const auto give_up = [&](const std::string& why) {
    for (const auto& id : jobs) {
      try {
        slurm->cancel(id);
      } catch (const std::exception&) {
        // Ended already.
      }
    }
    return Exit(kExitFailure, "hpctrain drill: " + why + (jobs.size() > 1 ? "; jobs " : "; job ") +
                                  jobs.front() + (jobs.size() > 1 ? " and " + jobs.back() : "") +
                                  " cancelled");
  };
  const auto ready =
      drill::readiness(drilled_spec.spec, slurm->requeue_allowed(drilled.job_id), drilled.job_id);
  if (!ready.problem.empty()) throw give_up(ready.problem);
  if (!ready.note.empty()) std::cerr << "drill: " << ready.note << "\n";
  Drill drill(*slurm, drilled_spec.spec, drilled.run_dir, timeout_s, options.kill_command);
  std::vector<Row> rows;
  const std::vector<Event> events =
      options.events.empty() ? drill::default_events(drilled_spec.spec) : options.events;
  for (const Event event : events) {
    rows.push_back(drill.play(event));
    std::cerr << drill::table({rows.back()});
    if (!rows.back().ok) {
      std::cout << drill::table(rows);
      throw give_up("the run did not survive the " + rows.back().event + ": " + rows.back().did);
    }
  }
  rows.push_back(weights_row(drilled.run_dir, reference, timeout_s));
  std::cout << drill::table(rows);
  if (!rows.back().ok) throw give_up("the final weights: " + rows.back().did);
  std::cerr << "drill: every event survived; runs in " << root.string() << "\n";
}

}  // namespace

void add_drill(CLI::App& app) {
  struct Args {
    SpecArgs spec;
    std::string events, dir;  // events: empty for drill::default_events
    drill::Options options;
    bool no_reference = false;
    int64_t timeout_s = 900;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "drill", "Play the failures a long run must survive on a short version of the spec");
  args->spec.add_to(*cmd);
  cmd->add_option("--events", args->events,
                  "Which, in order: preempt, requeue, hang, kill-node (default: the first three, "
                  "and kill-node where the spec has spare nodes)");
  cmd->add_option("--kill-command", args->options.kill_command,
                  "How kill-node loses a node: run by /bin/sh with the node's name as $1 "
                  "(default: SIGKILL to the job's workers on it)");
  cmd->add_option("--steps", args->options.steps, "Training steps of the short version")
      ->capture_default_str()
      ->check(CLI::Range(8, 100000));
  cmd->add_option("--time", args->options.time, "Its time limit (job.time)")->capture_default_str();
  cmd->add_option("--dir", args->dir, "Where the two runs go (default: the spec's run_dir-drill)");
  cmd->add_flag("--no-reference", args->no_reference,
                "Submit no undisturbed run (the weights are not compared)");
  cmd->add_option("--timeout", args->timeout_s, "Seconds each wait may take")
      ->capture_default_str()
      ->check(CLI::Range(10, 86400));
  cmd->callback([args, cmd] {
    refuse_remotely(*cmd);
    try {
      if (!args->events.empty()) args->options.events = drill::parse_events(args->events);
    } catch (const std::invalid_argument& e) {
      throw Exit(kExitBadInput, std::string("hpctrain drill: ") + e.what());
    }
    run_drill(args->spec, args->options, args->dir, !args->no_reference, args->timeout_s);
  });
}

}  // namespace hpctrain::cli
