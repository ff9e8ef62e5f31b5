#include "supervisor/supervisor.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <thread>

#include "common/exit_codes.hpp"
#include "common/process.hpp"
#include "common/records.hpp"
#include "common/run_layout.hpp"
#include "common/time.hpp"
#include "render/render.hpp"
#include "run/run_dir.hpp"
#include "supervisor/causes.hpp"
#include "supervisor/step_output.hpp"

namespace hpctrain::supervisor {

volatile std::sig_atomic_t g_terminated = 0;

namespace {

using std::chrono::milliseconds;

bool terminated() { return g_terminated != 0; }

// Seconds to one decimal, as the ledger writes them.
double tenths(double seconds) { return std::round(seconds * 10) / 10; }
std::string tenths_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", tenths(seconds));
  return text;
}

// Sleeps `ms`, to the end even when a signal comes (the flag is read afterwards).
void pause_for(milliseconds ms) {
  const auto until = Clock::now() + ms;
  while (Clock::now() < until) std::this_thread::sleep_until(until);
}

void say(const std::string& line) { std::cout << line << std::endl; }
void warn(const std::string& line) { std::cerr << line << std::endl; }

// What Slurm answers through `ask`, or `unknown` when it does not: refused, not installed, or no
// controller answering (said on stderr: nothing else would report it).
template <typename Ask, typename T>
T or_unknown(Ask ask, T unknown) {
  try {
    return ask();
  } catch (const slurm::SlurmUnreachable& e) {
    warn(std::string("hpctrain: ") + e.what());
  } catch (const slurm::SlurmError&) {
  }
  return unknown;
}

// A ledger line of the job attempt `c` ending now with `status` for `reason`: the whole
// allocation, from the attempt's start (a step's line narrows both).
records::Attempt attempt_line(const AttemptContext& c, int status, records::Reason reason) {
  records::Attempt a;
  a.job_id = c.job;
  a.array_task_id = c.array_task;
  a.restart = c.restart;
  a.nodes = c.nodes;
  a.start = c.started;
  a.end = utc_now();
  a.exit_status = status;
  a.reason = reason;
  a.last_step = run::last_committed_step(c.task_dir);
  return a;
}

// The node-loss fields of a ledger line.
void copy_loss(const records::Attempt& from, records::Attempt& to) {
  to.lost_nodes = from.lost_nodes;
  to.added_nodes = from.added_nodes;
  to.loss = from.loss;
  to.detected = from.detected;
  to.detected_by = from.detected_by;
  to.stop_s = from.stop_s;
}

using records::LossCause;
using Dead = Unanswered;  // (node, cause)

// The allocation's nodes as the supervisor watches them.
struct NodeWatch {
  Nodes allocation;  // the job's nodes by name (empty: unknown, nothing is watched)
  Nodes training;    // the nodes the current srun step trains on
  Nodes lost;        // lost (or avoided) in this attempt
  Nodes exclude;     // lost in this job: what a requeue excludes
  Nodes avoided;     // lost in an earlier attempt, kept out of this one
  bool watching = false;
  int port = 0;  // slurmd's
};

// How the run goes on after an attempt that asks for another: the job requeued, the next job of a
// chain submitted (Slurm refused the requeue), or neither (the job ends with the step's status).
enum class Continued { kRequeued, kChained, kNeither };

// The srun step running now (0, 1, ... within the job attempt).
struct SrunStep {
  int64_t index = 0;
  int64_t world = 0;     // its ranks
  std::string started;   // UTC
  std::string nodelist;  // as the ledger writes it
};

// A node loss as it is found and recorded.
struct LossState {
  int64_t count = 0;  // node losses in this attempt
  Dead dead;          // the nodes found lost in the current srun step
  int64_t detected_ms = 0, stopped_ms = 0;
  std::string suspect_text;                 // the workers' verdict's message
  std::optional<records::Attempt> pending;  // a node_lost line waiting for its recovery time
  records::Attempt fields;                  // the loss fields of the last loss
};

class Supervisor {
 public:
  Supervisor(const AttemptContext& c, const SupervisorOptions& options, slurm::SlurmClient& slurm,
             const NodeProbe& probe)
      : c_(c), k_(options.knobs), srun_argv_(options.srun_argv), slurm_(slurm), probe_(probe) {
    srun_.started = c.started;
    srun_.nodelist = c.nodes;
    srun_.world = k_.train_nodes * k_.tasks_per_node;
  }

  int run() {
    // Room for this attempt's ledger line should the run directory fill up meanwhile.
    if (!records::reserve_ledger_room(c_.task_dir)) {
      warn("hpctrain: no room in " + c_.task_dir.string() +
           " to keep for the ledger: its filesystem is full");
    }
    watch_nodes();
    say("hpctrain: job " + c_.job + " attempt " + std::to_string(c_.restart + 1) + " on " +
        c_.nodes + " at " + c_.started);
    run_steps();
    flush_loss(std::nullopt);
    return finish();
  }

 private:
  std::string tag() const { return std::to_string(c_.restart) + "." + std::to_string(srun_.index); }

  // The ledger line of the srun step running now.
  records::Attempt line(int status, records::Reason reason) const {
    records::Attempt a = attempt_line(c_, status, reason);
    a.nodes = srun_.nodelist;
    a.start = srun_.started;
    a.srun_step = srun_.index;
    a.world_size = srun_.world;
    return a;
  }

  void watch_nodes();
  void run_steps();
  int watch_step(common::Process& srun);
  int requeue_status(int status) const;
  void look_again(int status);
  void look_for_gpu_fault();
  bool handle_loss(int status);
  int finish();
  Continued requeue_or_chain(bool excluding);
  bool exclusion_allowed();
  void exclude_on_requeue();

  Dead confirmed_dead();
  void stop_step(common::Process& srun);
  void check_recovered();
  void flush_loss(std::optional<double> recover_s);

  const AttemptContext& c_;
  Knobs k_;
  SrunArgv srun_argv_;
  slurm::SlurmClient& slurm_;
  const NodeProbe& probe_;
  NodeWatch nodes_;
  SrunStep srun_;
  LossState loss_;
  StepOutput output_;  // the current step's lines, for the classifier
  int status_ = 0;
};

// The allocation's nodes by name. The step trains on train_nodes of them: first the ones it
// already had that are healthy, then the others in order, the batch host last. Without the names
// (scontrol missing) the step runs on the whole allocation and nothing is watched.
void Supervisor::watch_nodes() {
  if (c_.nodes != "?") {
    nodes_.allocation = or_unknown([&] { return slurm_.hostnames(c_.nodes); }, Nodes());
  }
  for (const auto& n : nodes_.allocation) {
    if (!is_node_name(n)) {
      nodes_.allocation.clear();
      break;
    }
  }
  const auto port = or_unknown([&] { return slurm_.slurmd_port(); }, std::optional<int>());
  if (port) nodes_.port = *port;
  nodes_.watching =
      static_cast<int64_t>(nodes_.allocation.size()) >= k_.train_nodes && nodes_.port > 0;
  // Nodes lost in earlier attempts of this job, when Slurm placed this one on them again.
  nodes_.exclude = earlier_lost(records::read_attempts(c_.task_dir), c_.job);
  if (nodes_.watching && !nodes_.exclude.empty()) {
    const auto a = avoid_earlier(nodes_.allocation, nodes_.exclude, k_);
    if (!a.message.empty()) (a.to_stderr ? warn : say)(a.message);
    nodes_.avoided = a.avoided;
    nodes_.lost.insert(nodes_.lost.end(), nodes_.avoided.begin(), nodes_.avoided.end());
  }
  if (!nodes_.watching) return;
  nodes_.training =
      choose_nodes(nodes_.training, nodes_.allocation, nodes_.lost, c_.batch_host, k_.train_nodes);
  // The probe must work before it can be believed: a site whose nodes cannot reach each other's
  // slurmd port gets the workers' heartbeat alone (and the requeue), not a false alarm a second.
  const auto dead = confirmed_dead();
  if (!dead.empty()) {
    warn("hpctrain: slurmd on " + dead.front().first + " (port " + std::to_string(nodes_.port) +
         ") does not answer this node; node loss is not watched in this attempt "
         "(docs/resilience.md)");
    nodes_.watching = false;
  }
}

void Supervisor::run_steps() {
  while (true) {
    srun_.started = utc_now();
    render::StepShape shape{k_.train_nodes, "", false};
    if (nodes_.watching) {
      shape = {static_cast<int64_t>(nodes_.training.size()), join(nodes_.training),
               srun_.index > 0};
      srun_.nodelist = shape.nodelist;
    }
    srun_.world = shape.nodes * k_.tasks_per_node;
    if (srun_.index > 0) {
      say("hpctrain: step " + std::to_string(srun_.index) + " on " + srun_.nodelist + " (" +
          std::to_string(srun_.world) + " ranks)");
    }
    loss_.dead.clear();
    if (terminated()) {
      // TERM came before this step started (during the setup or a fence): none is started.
      status_ = 143;
      return;
    }
    common::ProcessOptions options;
    options.env = common::environment_with(
        {"HPCTRAIN_STEP_TAG=" + tag(), "HPCTRAIN_WORLD_SIZE=" + std::to_string(srun_.world)});
    const auto argv = srun_argv_(shape);
    output_.mark();
    common::Process srun(argv, options);
    if (!srun.started()) warn("hpctrain: cannot run " + argv[0] + ": " + srun.error());
    const int status = watch_step(srun);
    look_again(status);
    flush_loss(std::nullopt);
    status_ = status;
    if (loss_.dead.empty() || !handle_loss(status)) return;
  }
}

// Waits for the step, a second at a time: a hang verdict ends it after the grace time (the named
// ranks print their stacks first; a rank stuck in the kernel cannot even exit), a lost node at
// once.
int Supervisor::watch_step(common::Process& srun) {
  std::optional<Clock::time_point> verdict_seen;
  bool stopped = false;  // by this supervisor
  while (!srun.poll()) {
    // A second between looks, ended early by the step's end.
    if (srun.wait_for(milliseconds(1000))) break;
    check_recovered();
    if (!verdict_seen) {
      const auto v = find_verdict(records::read_metrics_tail(c_.task_dir).records, tag());
      if (v && v->kind == records::MetricsKind::kHang) verdict_seen = Clock::now();
    }
    if (verdict_seen && Clock::now() - *verdict_seen > std::chrono::seconds(k_.hang_grace_s)) {
      stopped = true;
      stop_step(srun);
      break;
    }
    if (!nodes_.watching || terminated()) continue;
    loss_.dead = confirmed_dead();
    if (!loss_.dead.empty()) {
      loss_.detected_ms = unix_time_ms();
      stopped = true;
      stop_step(srun);
      loss_.stopped_ms = unix_time_ms();
      break;
    }
  }
  const int status = srun.wait();
  return stopped ? status : requeue_status(status);
}

// srun's --kill-on-bad-exit ends the other ranks as soon as the first one exits 75 (they were
// about to, their checkpoint committed), and srun then reports their signal (128 + N): when rank 0
// said it checkpointed to be requeued, and neither TERM nor this supervisor ended the step, the
// step asked for the requeue (under load the race was seen to turn a chain's requeue into a
// failure of unknown cause).
int Supervisor::requeue_status(int status) const {
  if (status <= 128 || status > 128 + 64 || terminated()) return status;
  const std::string said = "(exit status " + std::to_string(kExitRequeue) + ")";
  for (const auto& line : output_.lines()) {
    if (line.find(kWorkerEndMarker) != std::string::npos && line.find(said) != std::string::npos) {
      return kExitRequeue;
    }
  }
  return status;
}

// After a failed step: the ranks may have noticed a lost node first (heartbeat, a collective that
// failed), or given a node up themselves: hung (the hang watchdog named its ranks) or too slow
// (evicted). Such a node is replaced as a lost one, without a fence: its ranks ended with the step.
void Supervisor::look_again(int status) {
  const auto failed = [&] {
    return nodes_.watching && !terminated() && loss_.dead.empty() && status != 0 &&
           status != kExitRequeue;
  };
  if (failed()) {
    loss_.dead = confirmed_dead();
    if (!loss_.dead.empty()) loss_.detected_ms = loss_.stopped_ms = unix_time_ms();
  }
  if (!failed()) return;
  const auto v = find_verdict(records::read_metrics_tail(c_.task_dir).records, tag());
  if (!v) {
    look_for_gpu_fault();
    return;
  }
  for (const auto& host : v->hosts) {
    const auto node = node_of_host(host, nodes_.training);
    if (!node) {
      warn("hpctrain: the " + std::string(records::name_of(v->kind)) + " verdict names host " +
           host + ", none of the step's nodes (" + join(nodes_.training) + "): not replaced");
    } else if (std::none_of(loss_.dead.begin(), loss_.dead.end(),
                            [&](const auto& d) { return d.first == *node; })) {
      loss_.dead.emplace_back(*node, v->kind == records::MetricsKind::kHang ? LossCause::kHang
                                     : v->kind == records::MetricsKind::kCorrupt
                                         ? LossCause::kCorruption
                                         : LossCause::kStraggler);
    }
  }
  if (loss_.dead.empty()) return;
  loss_.detected_ms =
      v->wall_time > 0 ? static_cast<int64_t>(std::llround(v->wall_time * 1000)) : unix_time_ms();
  loss_.suspect_text = v->message;
  loss_.stopped_ms = unix_time_ms();
}

// A GPU that failed (an ECC or Xid error, a CUDA error the classifier takes for hardware) on a
// node that the line of output saying so names: that node is replaced as a lost one, or kept out
// of the requeued job, rather than the job retried on the same GPU.
void Supervisor::look_for_gpu_fault() {
  const auto fault = gpu_fault(output_.lines(), nodes_.training);
  if (!fault) return;
  loss_.dead.emplace_back(fault->node, LossCause::kGpuHardware);
  loss_.detected_ms = loss_.stopped_ms = unix_time_ms();
  loss_.suspect_text = fault->line;
}

// A node is lost: replace it (or shrink) and go on in this allocation; false when the job must
// end (requeue) instead.
bool Supervisor::handle_loss(int status) {
  Nodes newly;
  for (const auto& [node, cause] : loss_.dead) newly.push_back(node);
  nodes_.lost.insert(nodes_.lost.end(), newly.begin(), newly.end());
  ++loss_.count;
  const auto& [first, cause] = loss_.dead.front();
  loss_.fields = {};
  loss_.fields.loss = cause;
  switch (cause) {
    case LossCause::kSilent:
      loss_.fields.detected_by = "no answer from slurmd on " + first + " within 2 s";
      break;
    case LossCause::kHang:
      loss_.fields.detected_by = "hang watchdog: " + loss_.suspect_text;
      break;
    case LossCause::kStraggler:
      loss_.fields.detected_by = "evicted, " + loss_.suspect_text;
      break;
    case LossCause::kRefused:
      loss_.fields.detected_by = "slurmd on " + first + " refused the connection";
      break;
    case LossCause::kGpuHardware:
      loss_.fields.detected_by = "GPU hardware: " + loss_.suspect_text;
      break;
    case LossCause::kCorruption:
      loss_.fields.detected_by = "replay on divergence, " + loss_.suspect_text;
      break;
  }
  const Nodes old_nodes = nodes_.training;
  if (k_.policy != spec::OnNodeLoss::kRequeue && loss_.count <= k_.max_node_losses) {
    nodes_.training = choose_nodes(nodes_.training, nodes_.allocation, nodes_.lost, c_.batch_host,
                                   k_.train_nodes);
  }
  const bool recovering = recovers(k_, loss_.count, nodes_.training.size());
  Nodes added;
  for (const auto& n : nodes_.training) {
    if (!contains(old_nodes, n)) added.push_back(n);
  }
  loss_.fields.lost_nodes = join(newly);
  loss_.fields.added_nodes = recovering ? join(added) : "";
  loss_.fields.detected = utc_ms(loss_.detected_ms);
  const double stop_s = (loss_.stopped_ms - loss_.detected_ms) / 1000.0;
  loss_.fields.stop_s = tenths(stop_s);
  say("hpctrain: node lost: " + loss_.fields.lost_nodes + " (" + loss_.fields.detected_by +
      "); step stopped in " + tenths_text(stop_s) + " s");
  srun_.nodelist = join(old_nodes);
  if (!recovering) {
    status_ = kExitPeerLost;
    return false;
  }
  // The line waits for the recovery time (flush_loss), describing the step that ended.
  loss_.pending = line(status, records::Reason::kNodeLost);
  copy_loss(loss_.fields, *loss_.pending);
  EndFacts facts;
  facts.status = status;
  facts.node_lost = cause;
  facts.loss_text = loss_.fields.detected_by;
  const Classified lost = classify(facts);
  loss_.pending->cause = lost.cause;
  loss_.pending->evidence = lost.evidence;
  ++srun_.index;
  // Fence: ranks on a node nobody can reach (cut off, not dead) stop themselves within the
  // heartbeat timeout, rank 0 a beat later; none of them may still write to the run directory
  // when the new step starts.
  for (const auto& [node, why] : loss_.dead) {
    if (why != LossCause::kSilent) continue;
    const int64_t fence_ms = loss_.detected_ms + (k_.heartbeat_timeout_s + 5) * 1000;
    while (unix_time_ms() < fence_ms && !terminated()) pause_for(milliseconds(500));
    break;
  }
  return !terminated();
}

// probe twice, half a second apart; a node counts only if both rounds found it (a slurmd that
// misses one deadline, or restarts, is not a lost node).
Dead Supervisor::confirmed_dead() {
  Nodes others;
  for (const auto& n : nodes_.training) {
    if (n != c_.batch_host) others.push_back(n);
  }
  if (others.empty()) return {};
  const auto first = probe_(others, nodes_.port, milliseconds(2000));
  if (first.empty()) return {};
  pause_for(milliseconds(500));
  const auto again = probe_(others, nodes_.port, milliseconds(2000));
  Dead out;
  for (const auto& [node, cause] : first) {
    for (const auto& second : again) {
      if (second.first == node) out.emplace_back(node, cause);
    }
  }
  return out;
}

// Kills the step's tasks through slurmctld, then srun itself if it has not ended 3 s later: srun
// alone would wait for the lost node's tasks, whose end it never hears of.
void Supervisor::stop_step(common::Process& srun) {
  const auto steps =
      or_unknown([&] { return slurm_.step_ids(c_.slurm_job_id); }, std::vector<std::string>());
  for (const auto& id : steps) slurm_.kill_step(id);
  if (!srun.wait_for(milliseconds(3000))) srun.signal(SIGKILL);
}

// The node_lost line of the previous step waits for the recovery time: until the new step's
// rank 0 says it took its first step (a "started" record with the step's tag), or the new step
// ends without it.
void Supervisor::check_recovered() {
  if (!loss_.pending) return;
  if (const auto wall = find_started(records::read_metrics_tail(c_.task_dir).records, tag())) {
    flush_loss(tenths(*wall - loss_.detected_ms / 1000.0));
  }
}

void Supervisor::flush_loss(std::optional<double> recover_s) {
  if (!loss_.pending) return;
  loss_.pending->recover_s = recover_s;
  records::append_attempt(c_.task_dir, *loss_.pending);
  loss_.pending.reset();
}

// Whether the job's ExcNodeList may take every node this job lost: asked before scontrol
// requeue, whose TERM ends what runs after it.
bool Supervisor::exclusion_allowed() {
  if (nodes_.exclude.empty()) return false;
  const auto partitions =
      or_unknown([&] { return slurm_.partitions(); }, std::vector<slurm::PartitionInfo>());
  const auto* partition = slurm::find_partition(
      partitions, c_.partition.empty() ? std::nullopt : std::optional<std::string>(c_.partition));
  const int64_t total = partition ? partition->total_nodes() : 0;
  const int64_t need = c_.job_nodes.value_or(static_cast<int64_t>(nodes_.allocation.size()));
  if (exclusion_fits(total, nodes_.exclude.size(), need)) return true;
  warn("hpctrain: not excluding " + join(nodes_.exclude) + " on requeue: partition " +
       (c_.partition.empty() ? "?" : c_.partition) + " has " + std::to_string(total) +
       " nodes and the job needs " + std::to_string(need));
  return false;
}

// Right after scontrol requeue, while the job is pending again (Slurm updates the ExcNodeList of
// a pending job only) and this process lives on for KillWait with its TERM handled, sets
// ExcNodeList to every node this job lost, so the next attempt is not placed there.
void Supervisor::exclude_on_requeue() {
  const std::string list = join(nodes_.exclude);
  for (int attempt = 0; attempt < 8; ++attempt) {
    try {
      slurm_.exclude_nodes(c_.job, list);
      say("hpctrain: requeued with ExcNodeList=" + list);
      return;
    } catch (const slurm::SlurmUnreachable& e) {
      warn(std::string("hpctrain: ") + e.what());
      break;  // asking again would wait as long again
    } catch (const slurm::SlurmError&) {
    }
    pause_for(milliseconds(100));
  }
  warn("hpctrain: scontrol update JobId=" + c_.job + " ExcNodeList=" + list + " failed");
}

int Supervisor::finish() {
  // When the job is cancelled while srun is still launching the step, srun can return 0 and the
  // TERM may never come here; a job that is no longer RUNNING is being terminated.
  // Slurm's state of the job also says why TERM came (TIMEOUT, CANCELLED, a requeue's PENDING).
  const auto state =
      or_unknown([&] { return slurm::state_of(slurm_.query(c_.job), c_.job); }, std::string());
  if (!state.empty() && state != "RUNNING") g_terminated = 1;
  const auto ledger = records::read_attempts(c_.task_dir);
  const auto newest = run::last_committed_step(c_.task_dir);
  EndFacts facts;
  facts.status = status_;
  facts.terminated = terminated();
  facts.slurm_state = state;
  if (!loss_.dead.empty()) {
    facts.node_lost = loss_.fields.loss;
    facts.loss_text = loss_.fields.detected_by;
  }
  facts.finished = run::finished_at_checkpoint(c_.task_dir);
  facts.lines = output_.lines();
  facts.filesystem = run::filesystem_trouble(c_.task_dir);
  const Classified why = classify(facts);
  Ending e{terminated(), !loss_.dead.empty(),          status_,
           c_.restart,   consecutive_failures(ledger), attempts_without_progress(ledger, newest),
           why.cause};
  const records::Reason reason = end_reason(k_, e);
  if (reason == records::Reason::kNoProgress) {
    warn("hpctrain: " + std::to_string(*e.stalled) +
         " attempts in a row ended without a new committed checkpoint (newest: " +
         (newest ? std::to_string(*newest) : "null") +
         "); not requeuing (preemption.max_attempts_without_progress = " +
         std::to_string(k_.max_no_progress) + ")");
  }
  records::Attempt a = line(status_, reason);
  a.cause = why.cause;
  a.evidence = why.evidence;
  if (!e.terminated && e.node_lost) {
    copy_loss(loss_.fields, a);
  }
  const bool requeueing = records::is_requeue(reason);
  // What the requeued job is to avoid: the nodes lost in this job, this attempt's included.
  for (const auto& n : nodes_.lost) {
    if (!contains(nodes_.exclude, n)) nodes_.exclude.push_back(n);
  }
  const bool excluding = requeueing && exclusion_allowed();
  if (excluding) a.excluded = join(nodes_.exclude);
  a.avoided = join(nodes_.avoided);
  // The line is written once it is known how the run goes on: a chained attempt is not called
  // requeued. A requeue's TERM is handled here and KillWait leaves the time to write it.
  const Continued how = requeueing ? requeue_or_chain(excluding) : Continued::kNeither;
  if (how == Continued::kChained) a.reason = records::chained(reason);
  try {
    records::append_attempt(c_.task_dir, a);
  } catch (const std::exception& error) {
    // A full or read-only run directory: the ledger misses this attempt (and the failure budget,
    // counted there, this failure). Said here, with the line, in case this log can take it.
    warn(std::string("hpctrain: this attempt could not be recorded in the ledger (") +
         error.what() + "); its line: " + records::to_line(a));
  }
  const std::string cause(records::name_of(why.cause));
  say("hpctrain: attempt ended: status " + std::to_string(status_) + ", " +
      std::string(records::name_of(a.reason)) + " (" + cause + ")");
  if (how == Continued::kRequeued && excluding) exclude_on_requeue();
  if (reason == records::Reason::kFailed && stops_run(k_, why.cause) && !e.terminated &&
      !e.node_lost) {
    // The job's last log line: the verdict, and what the user can do.
    const std::string advice = advice_for(why.cause, k_.batch_size);
    warn("hpctrain: the run stopped: " + cause +
         (why.evidence.empty() ? "" : " (" + why.evidence + ")") +
         "; not retried: a retry would end the same way (resilience.stop_on)" +
         (advice.empty() ? "" : ". What to do: " + advice));
  } else if (reason == records::Reason::kFailed || why.cause == records::Cause::kUnknown) {
    warn("hpctrain: the attempt ended: " + cause +
         (why.evidence.empty() ? "" : " (" + why.evidence + ")"));
  }
  return how == Continued::kNeither ? status_ : kExitOk;
}

// Requeues the job; where Slurm refuses, submits the next job of a chain instead (with
// preemption.chain), which resumes the run as a requeued attempt would.
Continued Supervisor::requeue_or_chain(bool excluding) {
  try {
    slurm_.requeue(c_.job);
    return Continued::kRequeued;
  } catch (const slurm::SlurmUnreachable& e) {
    // The request may have reached the controller all the same: a next job of a chain could then
    // run beside the requeued one, in the same run directory.
    warn("hpctrain: scontrol requeue " + c_.job + " got no answer (" + e.what() +
         "); no chain is submitted: if the job does not come back, resubmit with "
         "'hpctrain submit'");
    return Continued::kNeither;
  } catch (const slurm::SlurmError& e) {
    warn(std::string("hpctrain: ") + e.what());
  }
  if (!k_.chain) {
    warn("hpctrain: preemption.chain is off; resubmit with 'hpctrain submit'");
    return Continued::kNeither;
  }
  if (c_.array_task) {
    warn("hpctrain: an array task does not chain; resubmit with 'hpctrain submit'");
    return Continued::kNeither;
  }
  // The next link takes the nodes lost so far as --exclude: the same rule as ExcNodeList.
  const std::string exclude = excluding ? join(nodes_.exclude) : std::string();
  std::string next;
  try {
    next = slurm_.submit(
        c_.task_dir / layout::kScript,
        {c_.job, {"HPCTRAIN_CHAIN_RESTART=" + std::to_string(c_.restart + 1)}, exclude});
  } catch (const slurm::SlurmError& e) {
    warn(std::string("hpctrain: the next job of the chain could not be submitted (") + e.what() +
         "); resubmit with 'hpctrain submit'");
    return Continued::kNeither;
  }
  records::append_submission(c_.task_dir, {next, utc_now(), 0, c_.job});
  say("hpctrain: job " + next + " continues the run once job " + c_.job +
      " has ended (a chain: Slurm does not requeue this job)" +
      (exclude.empty() ? std::string() : "; it excludes " + exclude));
  return Continued::kChained;
}

}  // namespace

SupervisorOptions supervisor_options_from_spec(const spec::Spec& spec,
                                               const std::string& spec_file) {
  SupervisorOptions o;
  o.knobs = knobs_from_spec(spec);
  o.srun_argv = [spec, spec_file](const render::StepShape& shape) {
    return render::srun_argv(spec, spec_file, shape);
  };
  return o;
}

int supervise(const AttemptContext& context, const SupervisorOptions& options,
              slurm::SlurmClient& slurm, const NodeProbe& probe) {
  return Supervisor(context, options, slurm, probe).run();
}

void record_setup_failure(const AttemptContext& c, int status, records::Reason reason,
                          int64_t world, const std::string& evidence) {
  records::Attempt a = attempt_line(c, status, reason);
  if (world > 0) a.world_size = world;
  a.cause = status == kExitBadInput ? records::Cause::kBadInput : records::Cause::kUnknown;
  a.evidence = !evidence.empty()
                   ? evidence
                   : "the batch script's set-up failed with exit status " + std::to_string(status) +
                         " (its lines above in the job's log)";
  records::append_attempt(c.task_dir, a);
}

AttemptContext context_from_env() {
  const auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  AttemptContext c;
  c.slurm_job_id = env("SLURM_JOB_ID");
  // A job of a chain (a requeue refused) counts on from the attempts before it.
  for (const char* name : {"SLURM_RESTART_COUNT", "HPCTRAIN_CHAIN_RESTART"}) {
    const auto count = env(name);
    if (digits(count)) c.restart += std::stoll(count);
  }
  c.nodes = env("SLURM_JOB_NODELIST");
  if (c.nodes.find_first_not_of("[]ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                "._,-") != std::string::npos) {
    c.nodes = "?";
  }
  c.batch_host = env("SLURMD_NODENAME");
  if (c.batch_host.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    c.batch_host = std::string(host).substr(0, std::string(host).find('.'));
  }
  c.partition = env("SLURM_JOB_PARTITION");
  const auto job_nodes = env("SLURM_JOB_NUM_NODES");
  if (digits(job_nodes)) c.job_nodes = std::stoll(job_nodes);
  return c;
}

}  // namespace hpctrain::supervisor
