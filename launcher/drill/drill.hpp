// hpctrain drill (docs/resilience.md "Drill"): a short version of the user's own spec, submitted
// twice, one run left alone and one disturbed, and the failures a long run must survive played on
// the disturbed one: a preemption notice, a requeue, a rank that stops answering, a killed node.
// For each: what
// the cluster and hpctrain did, whether training came back and from which checkpoint, how long it
// took; at the end whether the disturbed run has the undisturbed one's weights, bit for bit. The
// pure parts are here; cli/drill.cpp plays them on the cluster.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "run/snapshot.hpp"
#include "spec/spec.hpp"

namespace hpctrain::drill {

enum class Event { kPreempt, kRequeue, kHang, kKillNode };
// "preempt", "requeue", "hang", "kill-node": the names --events takes.
std::string_view name_of(Event event);
// "preemption notice", "requeue", "rank stops answering", "killed node": the table's.
std::string_view title_of(Event event);
// "preempt,requeue,hang": the events in that order; throws std::invalid_argument naming a name
// that is none, or a list without any.
std::vector<Event> parse_events(const std::string& list);
// The events played when --events is not given: preempt, requeue, hang, and kill-node where the
// spec has spare nodes (resilience.spare_nodes) to replace the node with.
std::vector<Event> default_events(const spec::Spec& spec);

struct Options {
  int64_t steps = 40;             // train.max_steps of the short version
  std::string time = "00:30:00";  // its job.time
  std::vector<Event> events;      // empty: default_events()
  // How the kill-node event loses a node: a command run by /bin/sh with the node's name as $1 (a
  // site's power-off or fencing tool, the test cluster's slurm-multinode.sh kill); empty: SIGKILL
  // to every worker of the job on the node (its processes die, its slurmd stays).
  std::string kill_command;
};

// The --set overrides that make the short version of a spec: its name and run directory, the
// steps, a checkpoint every steps/8 steps (at least 1; the events wait for them), none by the
// clock, evaluation during training off, the time limit.
std::vector<std::string> drill_overrides(const std::string& name, const std::filesystem::path& dir,
                                         const Options& options);

// Whether a run of `spec` can survive a preemption here, before anything is played: `problem`
// (the drill fails) when preemption is off or when Slurm will not requeue the job and no chain
// continues it; `note` when it survives by a chain instead. `requeue_allowed`: Slurm's word for
// the submitted job (nullopt: it did not say).
struct Readiness {
  std::string problem;
  std::string note;
};
Readiness readiness(const spec::Spec& spec, std::optional<bool> requeue_allowed,
                    const std::string& job_id);

// The ledger reasons after which the run does not go on: completed, failed, setup_failed,
// restart_limit, no_progress. Terminated is not one: TERM came from outside (scontrol requeue, a
// preemption by Slurm, scancel), and whether Slurm requeues the job shows only in a next attempt.
bool ends_run(records::Reason reason);

// What one event led to, read from the disturbed run's directory after it was played at
// `played_at` (unix seconds), `ledger_before` lines of attempts.jsonl being there then.
struct Outcome {
  bool resumed = false;                 // a worker started training after the event
  std::optional<int64_t> resumed_from;  // from this checkpoint step (nullopt: from the start)
  std::optional<double> recovery_s;     // played -> its first training step
  std::string
      did;  // the ledger's new lines: "requeued (preempted)", "chained to job 12 (preempted)"
  bool ended =
      false;  // a new line ended the run (completed, failed, limits): it will not come back
};
Outcome outcome(const run::Snapshot& snapshot, size_t ledger_before, double played_at);

// The newest step `snapshot` shows trained: its newest train line's or committed checkpoint's.
int64_t newest_step(const run::Snapshot& snapshot);

// A preemption notice played at `played_at` that no worker heeded: no ledger line since then (or
// only the run's completion), yet training went on to `steps_past` steps or more beyond
// `step_at_play` (the newest step known when it was played). A worker that gets the signal stops
// within a step or two (the ranks' agreement), so a run that trains on never got it. The step
// reached, or nullopt.
std::optional<int64_t> unheeded_until(const run::Snapshot& snapshot, size_t ledger_before,
                                      double played_at, int64_t step_at_play, int64_t steps_past);

// What an unheeded notice says: the signal, how far training went on, what to change.
std::string unheeded_text(std::string_view signal, int64_t from, int64_t to);

// The fingerprints of the final weights every rank printed ("final weights fnv1a64 0x...") in
// the run's logs (logs/*.err, every job of a chain).
std::set<std::string> final_fingerprints(const std::filesystem::path& run_dir);

// One line of the drill's table.
struct Row {
  std::string event, at, did, resumed, recovery;
  bool ok = true;
};
// The rows under a header, columns aligned; "FAILED" in front of a row that is not ok.
std::string table(const std::vector<Row>& rows);

}  // namespace hpctrain::drill
