#include "step/supervisor.hpp"

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

namespace hpctrain::step {

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

// The node-loss fields of a ledger line.
void copy_loss(const records::Attempt& from, records::Attempt& to) {
  to.lost_nodes = from.lost_nodes;
  to.added_nodes = from.added_nodes;
  to.cause = from.cause;
  to.detected = from.detected;
  to.detected_by = from.detected_by;
  to.stop_s = from.stop_s;
}

using records::Cause;
using Dead = Unanswered;  // (node, cause)

class Supervisor {
 public:
  Supervisor(const AttemptContext& c, const spec::Spec& spec, slurm::SlurmClient& slurm,
             const NodeProbe& probe)
      : c_(c), spec_(spec), k_(knobs_from_spec(spec)), slurm_(slurm), probe_(probe) {
    step_started_ = c.started;
    step_list_ = c.nodes;
    world_ = k_.train_nodes * k_.tasks_per_node;
  }

  int run() {
    watch_nodes();
    say("hpctrain: job " + c_.job + " attempt " + std::to_string(c_.restart + 1) + " on " +
        c_.nodes + " at " + c_.started);
    run_steps();
    flush_loss(std::nullopt);
    return finish();
  }

 private:
  std::string tag() const { return std::to_string(c_.restart) + "." + std::to_string(step_index_); }

  records::Attempt line(int status, records::Reason reason) const {
    records::Attempt a;
    a.job_id = c_.job;
    a.array_task_id = c_.array_task;
    a.restart = c_.restart;
    a.nodes = step_list_;
    a.start = step_started_;
    a.end = utc_now();
    a.exit_status = status;
    a.reason = reason;
    a.last_step = run::last_committed_step(c_.task_dir);
    a.step = step_index_;
    a.world_size = world_;
    return a;
  }

  void watch_nodes();
  void run_steps();
  int watch_step(common::Process& srun);
  void look_again(int status);
  bool handle_loss(int status);
  int finish();
  int requeue_or_chain(bool excluding);
  bool exclusion_allowed();
  void exclude_on_requeue();

  Dead confirmed_dead();
  void stop_step(common::Process& srun);
  void check_recovered();
  void flush_loss(std::optional<double> recover_s);

  const AttemptContext& c_;
  const spec::Spec& spec_;
  Knobs k_;
  slurm::SlurmClient& slurm_;
  const NodeProbe& probe_;

  Nodes allocation_, step_nodes_, lost_, exclude_, avoided_;
  bool watching_ = false;
  int port_ = 0;
  int64_t step_index_ = 0, world_ = 0, losses_ = 0;
  std::string step_started_, step_list_;
  Dead dead_;
  int64_t detected_ms_ = 0, stopped_ms_ = 0;
  std::string suspect_text_;
  std::optional<records::Attempt> pending_loss_;
  records::Attempt loss_;  // the loss fields of the last loss
  int status_ = 0;
};

// The allocation's nodes by name. The step trains on train_nodes of them: first the ones it
// already had that are healthy, then the others in order, the batch host last. Without the names
// (scontrol missing) the step runs on the whole allocation and nothing is watched.
void Supervisor::watch_nodes() {
  if (c_.nodes != "?") {
    allocation_ = or_unknown([&] { return slurm_.hostnames(c_.nodes); }, Nodes());
  }
  for (const auto& n : allocation_) {
    if (!is_node_name(n)) {
      allocation_.clear();
      break;
    }
  }
  const auto port = or_unknown([&] { return slurm_.slurmd_port(); }, std::optional<int>());
  if (port) port_ = *port;
  watching_ = static_cast<int64_t>(allocation_.size()) >= k_.train_nodes && port_ > 0;
  // Nodes lost in earlier attempts of this job, when Slurm placed this one on them again.
  exclude_ = earlier_lost(records::read_attempts(c_.task_dir), c_.job);
  if (watching_ && !exclude_.empty()) {
    const auto a = avoid_earlier(allocation_, exclude_, k_);
    if (!a.message.empty()) (a.to_stderr ? warn : say)(a.message);
    avoided_ = a.avoided;
    lost_.insert(lost_.end(), avoided_.begin(), avoided_.end());
  }
  if (!watching_) return;
  step_nodes_ = choose_nodes(step_nodes_, allocation_, lost_, c_.batch_host, k_.train_nodes);
  // The probe must work before it can be believed: a site whose nodes cannot reach each other's
  // slurmd port gets the workers' heartbeat alone (and the requeue), not a false alarm a second.
  const auto dead = confirmed_dead();
  if (!dead.empty()) {
    warn("hpctrain: slurmd on " + dead.front().first + " (port " + std::to_string(port_) +
         ") does not answer this node; node loss is not watched in this attempt "
         "(docs/resilience.md)");
    watching_ = false;
  }
}

void Supervisor::run_steps() {
  while (true) {
    step_started_ = utc_now();
    render::StepShape shape{k_.train_nodes, "", false};
    if (watching_) {
      shape = {static_cast<int64_t>(step_nodes_.size()), join(step_nodes_), step_index_ > 0};
      step_list_ = shape.nodelist;
    }
    world_ = shape.nodes * k_.tasks_per_node;
    if (step_index_ > 0) {
      say("hpctrain: step " + std::to_string(step_index_) + " on " + step_list_ + " (" +
          std::to_string(world_) + " ranks)");
    }
    dead_.clear();
    if (terminated()) {
      // TERM came before this step started (during the setup or a fence): none is started.
      status_ = 143;
      return;
    }
    common::ProcessOptions options;
    options.env = common::environment_with(
        {"HPCTRAIN_STEP_TAG=" + tag(), "HPCTRAIN_WORLD_SIZE=" + std::to_string(world_)});
    const auto argv = render::srun_argv(spec_, c_.spec_file, shape);
    common::Process srun(argv, options);
    if (!srun.started()) warn("hpctrain: cannot run " + argv[0] + ": " + srun.error());
    const int status = watch_step(srun);
    look_again(status);
    flush_loss(std::nullopt);
    status_ = status;
    if (dead_.empty() || !handle_loss(status)) return;
  }
}

// Waits for the step, a second at a time: a hang verdict ends it after the grace time (the named
// ranks print their stacks first; a rank stuck in the kernel cannot even exit), a lost node at
// once.
int Supervisor::watch_step(common::Process& srun) {
  std::optional<Clock::time_point> verdict_seen;
  while (!srun.poll()) {
    // A second between looks, ended early by the step's end.
    if (srun.wait_for(milliseconds(1000))) break;
    check_recovered();
    if (!verdict_seen) {
      const auto v = find_verdict(records::read_metrics_tail(c_.task_dir).records, tag());
      if (v && v->kind == records::MetricsKind::kHang) verdict_seen = Clock::now();
    }
    if (verdict_seen && Clock::now() - *verdict_seen > std::chrono::seconds(k_.hang_grace_s)) {
      stop_step(srun);
      break;
    }
    if (!watching_ || terminated()) continue;
    dead_ = confirmed_dead();
    if (!dead_.empty()) {
      detected_ms_ = unix_time_ms();
      stop_step(srun);
      stopped_ms_ = unix_time_ms();
      break;
    }
  }
  return srun.wait();
}

// After a failed step: the ranks may have noticed a lost node first (heartbeat, a collective that
// failed), or given a node up themselves: hung (the hang watchdog named its ranks) or too slow
// (evicted). Such a node is replaced as a lost one, without a fence: its ranks ended with the step.
void Supervisor::look_again(int status) {
  const auto failed = [&] {
    return watching_ && !terminated() && dead_.empty() && status != 0 && status != kExitRequeue;
  };
  if (failed()) {
    dead_ = confirmed_dead();
    if (!dead_.empty()) detected_ms_ = stopped_ms_ = unix_time_ms();
  }
  if (!failed()) return;
  const auto v = find_verdict(records::read_metrics_tail(c_.task_dir).records, tag());
  if (!v) return;
  for (const auto& host : v->hosts) {
    const auto node = node_of_host(host, step_nodes_);
    if (!node) {
      warn("hpctrain: the " + std::string(records::name_of(v->kind)) + " verdict names host " +
           host + ", none of the step's nodes (" + join(step_nodes_) + "): not replaced");
    } else if (std::none_of(dead_.begin(), dead_.end(),
                            [&](const auto& d) { return d.first == *node; })) {
      dead_.emplace_back(*node,
                         v->kind == records::MetricsKind::kHang ? Cause::kHang : Cause::kStraggler);
    }
  }
  if (dead_.empty()) return;
  detected_ms_ =
      v->wall_time > 0 ? static_cast<int64_t>(std::llround(v->wall_time * 1000)) : unix_time_ms();
  suspect_text_ = v->message;
  stopped_ms_ = unix_time_ms();
}

// A node is lost: replace it (or shrink) and go on in this allocation; false when the job must
// end (requeue) instead.
bool Supervisor::handle_loss(int status) {
  Nodes newly;
  for (const auto& [node, cause] : dead_) newly.push_back(node);
  lost_.insert(lost_.end(), newly.begin(), newly.end());
  ++losses_;
  const auto& [first, cause] = dead_.front();
  loss_ = {};
  loss_.cause = cause;
  switch (cause) {
    case Cause::kSilent:
      loss_.detected_by = "no answer from slurmd on " + first + " within 2 s";
      break;
    case Cause::kHang:
      loss_.detected_by = "hang watchdog: " + suspect_text_;
      break;
    case Cause::kStraggler:
      loss_.detected_by = "evicted, " + suspect_text_;
      break;
    case Cause::kRefused:
      loss_.detected_by = "slurmd on " + first + " refused the connection";
      break;
  }
  const Nodes old_nodes = step_nodes_;
  if (k_.policy != spec::OnNodeLoss::kRequeue && losses_ <= k_.max_node_losses) {
    step_nodes_ = choose_nodes(step_nodes_, allocation_, lost_, c_.batch_host, k_.train_nodes);
  }
  const bool recovering = recovers(k_, losses_, step_nodes_.size());
  Nodes added;
  for (const auto& n : step_nodes_) {
    if (!contains(old_nodes, n)) added.push_back(n);
  }
  loss_.lost_nodes = join(newly);
  loss_.added_nodes = recovering ? join(added) : "";
  loss_.detected = utc_ms(detected_ms_);
  const double stop_s = (stopped_ms_ - detected_ms_) / 1000.0;
  loss_.stop_s = tenths(stop_s);
  say("hpctrain: node lost: " + loss_.lost_nodes + " (" + loss_.detected_by +
      "); step stopped in " + tenths_text(stop_s) + " s");
  step_list_ = join(old_nodes);
  if (!recovering) {
    status_ = kExitPeerLost;
    return false;
  }
  // The line waits for the recovery time (flush_loss), describing the step that ended.
  pending_loss_ = line(status, records::Reason::kNodeLost);
  copy_loss(loss_, *pending_loss_);
  ++step_index_;
  // Fence: ranks on a node nobody can reach (cut off, not dead) stop themselves within the
  // heartbeat timeout, rank 0 a beat later; none of them may still write to the run directory
  // when the new step starts.
  for (const auto& [node, why] : dead_) {
    if (why != Cause::kSilent) continue;
    const int64_t fence_ms = detected_ms_ + (k_.heartbeat_timeout_s + 5) * 1000;
    while (unix_time_ms() < fence_ms && !terminated()) pause_for(milliseconds(500));
    break;
  }
  return !terminated();
}

// probe twice, half a second apart; a node counts only if both rounds found it (a slurmd that
// misses one deadline, or restarts, is not a lost node).
Dead Supervisor::confirmed_dead() {
  Nodes others;
  for (const auto& n : step_nodes_) {
    if (n != c_.batch_host) others.push_back(n);
  }
  if (others.empty()) return {};
  const auto first = probe_(others, port_, milliseconds(2000));
  if (first.empty()) return {};
  pause_for(milliseconds(500));
  const auto again = probe_(others, port_, milliseconds(2000));
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
  if (!pending_loss_) return;
  if (const auto wall = find_started(records::read_metrics_tail(c_.task_dir).records, tag())) {
    flush_loss(tenths(*wall - detected_ms_ / 1000.0));
  }
}

void Supervisor::flush_loss(std::optional<double> recover_s) {
  if (!pending_loss_) return;
  pending_loss_->recover_s = recover_s;
  records::append_attempt(c_.task_dir, *pending_loss_);
  pending_loss_.reset();
}

// Whether the job's ExcNodeList may take every node this job lost: asked before scontrol
// requeue, whose TERM ends what runs after it.
bool Supervisor::exclusion_allowed() {
  if (exclude_.empty()) return false;
  const auto partitions =
      or_unknown([&] { return slurm_.partitions(); }, std::vector<slurm::PartitionInfo>());
  const auto* partition = slurm::find_partition(
      partitions, c_.partition.empty() ? std::nullopt : std::optional<std::string>(c_.partition));
  const int64_t total = partition ? partition->total_nodes() : 0;
  const int64_t need = c_.job_nodes.value_or(static_cast<int64_t>(allocation_.size()));
  if (exclusion_fits(total, exclude_.size(), need)) return true;
  warn("hpctrain: not excluding " + join(exclude_) + " on requeue: partition " +
       (c_.partition.empty() ? "?" : c_.partition) + " has " + std::to_string(total) +
       " nodes and the job needs " + std::to_string(need));
  return false;
}

// Right after scontrol requeue, while the job is pending again (Slurm updates the ExcNodeList of
// a pending job only) and this process lives on for KillWait with its TERM handled, sets
// ExcNodeList to every node this job lost, so the next attempt is not placed there.
void Supervisor::exclude_on_requeue() {
  const std::string list = join(exclude_);
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
  if (!terminated()) {
    const auto state =
        or_unknown([&] { return slurm::state_of(slurm_.query(c_.job), c_.job); }, std::string());
    if (!state.empty() && state != "RUNNING") g_terminated = 1;
  }
  const auto ledger = records::read_attempts(c_.task_dir);
  const auto newest = run::last_committed_step(c_.task_dir);
  Ending e{terminated(),
           !dead_.empty(),
           status_,
           c_.restart,
           consecutive_failures(ledger),
           attempts_without_progress(ledger, newest)};
  const records::Reason reason = end_reason(k_, e);
  if (reason == records::Reason::kNoProgress) {
    warn("hpctrain: " + std::to_string(*e.stalled) +
         " attempts in a row ended without a new committed checkpoint (newest: " +
         (newest ? std::to_string(*newest) : "null") +
         "); not requeuing (preemption.max_attempts_without_progress = " +
         std::to_string(k_.max_no_progress) + ")");
  }
  records::Attempt a = line(status_, reason);
  if (!e.terminated && e.node_lost) {
    copy_loss(loss_, a);
  }
  const bool requeueing = records::is_requeue(reason);
  // What the requeued job is to avoid: the nodes lost in this job, this attempt's included.
  for (const auto& n : lost_) {
    if (!contains(exclude_, n)) exclude_.push_back(n);
  }
  const bool excluding = requeueing && exclusion_allowed();
  if (excluding) a.excluded = join(exclude_);
  a.avoided = join(avoided_);
  records::append_attempt(c_.task_dir, a);
  say("hpctrain: attempt ended: status " + std::to_string(status_) + ", " +
      std::string(records::name_of(reason)));
  return requeueing ? requeue_or_chain(excluding) : status_;
}

// Requeues the job; where Slurm refuses, submits the next job of a chain instead (with
// preemption.chain), which resumes the run as a requeued attempt would.
int Supervisor::requeue_or_chain(bool excluding) {
  try {
    slurm_.requeue(c_.job);
    if (excluding) exclude_on_requeue();
    return kExitOk;
  } catch (const slurm::SlurmUnreachable& e) {
    // The request may have reached the controller all the same: a next job of a chain could then
    // run beside the requeued one, in the same run directory.
    warn("hpctrain: scontrol requeue " + c_.job + " got no answer (" + e.what() +
         "); no chain is submitted: if the job does not come back, resubmit with "
         "'hpctrain submit'");
    return status_;
  } catch (const slurm::SlurmError& e) {
    warn(std::string("hpctrain: ") + e.what());
  }
  if (!k_.chain) {
    warn("hpctrain: preemption.chain is off; resubmit with 'hpctrain submit'");
    return status_;
  }
  if (c_.array_task) {
    warn("hpctrain: an array task does not chain; resubmit with 'hpctrain submit'");
    return status_;
  }
  // The next link takes the nodes lost so far as --exclude: the same rule as ExcNodeList.
  const std::string exclude = excluding ? join(exclude_) : std::string();
  std::string next;
  try {
    next = slurm_.submit(
        c_.task_dir / layout::kScript,
        {c_.job, {"HPCTRAIN_CHAIN_RESTART=" + std::to_string(c_.restart + 1)}, exclude});
  } catch (const slurm::SlurmError& e) {
    warn(std::string("hpctrain: the next job of the chain could not be submitted (") + e.what() +
         "); resubmit with 'hpctrain submit'");
    return status_;
  }
  records::append_submission(c_.task_dir, {next, utc_now(), 0, c_.job});
  say("hpctrain: job " + next + " continues the run once job " + c_.job +
      " has ended (a chain: Slurm does not requeue this job)" +
      (exclude.empty() ? std::string() : "; it excludes " + exclude));
  return kExitOk;
}

}  // namespace

int supervise(const AttemptContext& context, const spec::Spec& spec, slurm::SlurmClient& slurm,
              const NodeProbe& probe) {
  return Supervisor(context, spec, slurm, probe).run();
}

void record_setup_failure(const AttemptContext& c, int status, records::Reason reason,
                          int64_t world) {
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
  if (world > 0) a.world_size = world;
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

}  // namespace hpctrain::step
