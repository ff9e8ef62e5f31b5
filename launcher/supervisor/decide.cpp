#include "supervisor/decide.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>

#include "common/exit_codes.hpp"
#include "supervisor/causes.hpp"

namespace hpctrain::supervisor {

Knobs knobs_from_spec(const spec::Spec& spec) {
  Knobs k;
  k.requeue_enabled = spec.preemption.enabled;
  k.max_restarts = spec.preemption.max_restarts;
  k.max_failures = spec.preemption.max_consecutive_failures;
  k.max_no_progress = spec.preemption.max_attempts_without_progress;
  k.train_nodes = spec.job.nodes;
  k.tasks_per_node = spec.job.tasks_per_node;
  k.policy = spec.resilience.policy();
  k.max_node_losses = spec.resilience.max_node_losses;
  k.heartbeat_timeout_s = spec.resilience.heartbeat_timeout_s;
  k.hang_grace_s = spec.resilience.hang_grace_s;
  k.chain = spec.preemption.chain;
  k.stop_on.clear();
  for (const auto& name : spec.resilience.stop_on) {
    if (const auto cause = records::parse<records::Cause>(name)) k.stop_on.push_back(*cause);
  }
  k.batch_size = spec.train.batch_size;
  return k;
}

int64_t consecutive_failures(const std::vector<records::Attempt>& ledger) {
  int64_t n = 0;
  for (auto it = ledger.rbegin(); it != ledger.rend(); ++it) {
    if (!records::is_failure(it->reason)) break;
    ++n;
  }
  return n;
}

int64_t attempts_without_progress(const std::vector<records::Attempt>& ledger,
                                  std::optional<int64_t> newest) {
  int64_t n = 1;
  for (auto it = ledger.rbegin(); it != ledger.rend(); ++it) {
    // The newest of the run of lines equal to `newest` made the progress.
    if (it->last_step != newest) return n - 1;
    ++n;
  }
  // No line differs: the first attempt wrote the checkpoint they all end at, if there is one.
  return newest ? n - 1 : n;
}

bool is_node_name(const std::string& name) {
  return !name.empty() && name.find_first_not_of(
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
                              "vwxyz0123456789._-") == std::string::npos;
}

std::string join(const Nodes& nodes) {
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ",") + n;
  return out;
}

bool contains(const Nodes& nodes, const std::string& node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

Nodes earlier_lost(const std::vector<records::Attempt>& ledger, const std::string& job_id) {
  Nodes out;
  for (const auto& a : ledger) {
    if (a.job_id != job_id) continue;
    std::istringstream in(a.lost_nodes);
    std::string node;
    while (std::getline(in, node, ',')) {
      if (is_node_name(node) && !contains(out, node)) out.push_back(node);
    }
  }
  return out;
}

Nodes choose_nodes(const Nodes& current, const Nodes& allocation, const Nodes& lost,
                   const std::string& batch_host, int64_t want) {
  Nodes kept;
  for (const auto& n : current) {
    if (!contains(lost, n)) kept.push_back(n);
  }
  for (const auto& n : allocation) {
    if (static_cast<int64_t>(kept.size()) >= want) break;
    if (n == batch_host) continue;
    if (!contains(lost, n) && !contains(kept, n)) kept.push_back(n);
  }
  if (static_cast<int64_t>(kept.size()) < want && contains(allocation, batch_host) &&
      !contains(lost, batch_host) && !contains(kept, batch_host)) {
    kept.push_back(batch_host);
  }
  return kept;
}

Avoidance avoid_earlier(const Nodes& allocation, const Nodes& earlier, const Knobs& knobs) {
  Avoidance a;
  int64_t usable = 0;
  for (const auto& n : allocation) {
    if (contains(earlier, n)) {
      a.avoided.push_back(n);
    } else {
      ++usable;
    }
  }
  if (a.avoided.empty()) return a;
  if (usable >= knobs.train_nodes || (knobs.policy == spec::OnNodeLoss::kShrink && usable > 0)) {
    a.message =
        "hpctrain: not training on " + join(a.avoided) + ": lost in an earlier attempt of this job";
  } else {
    a.message = "hpctrain: training on " + join(a.avoided) +
                " although lost in an earlier attempt: only " + std::to_string(usable) +
                " other nodes";
    a.to_stderr = true;
    a.avoided.clear();
  }
  return a;
}

bool recovers(const Knobs& knobs, int64_t losses, size_t chosen) {
  if (knobs.policy == spec::OnNodeLoss::kRequeue || losses > knobs.max_node_losses) return false;
  if (static_cast<int64_t>(chosen) == knobs.train_nodes) return true;
  return knobs.policy == spec::OnNodeLoss::kShrink && chosen > 0;
}

records::Reason end_reason(const Knobs& knobs, const Ending& e) {
  using records::Reason;
  const bool may_restart = knobs.requeue_enabled && e.restart < knobs.max_restarts;
  Reason reason = Reason::kFailed;
  if (e.terminated) {
    reason = Reason::kTerminated;
  } else if (e.node_lost) {
    // Not the run's fault: no failure is counted.
    reason = may_restart ? Reason::kNodeLostRequeued : Reason::kFailed;
  } else if (e.cause && stops_run(knobs, *e.cause)) {
    return Reason::kFailed;  // a retry would end the same way
  } else if (e.status == 0 && (!e.cause || *e.cause == records::Cause::kCompleted)) {
    reason = Reason::kCompleted;
  } else if (e.status == kExitRequeue) {
    reason = may_restart ? Reason::kRequeued : Reason::kRestartLimit;
  } else {
    reason =
        may_restart && e.failures < knobs.max_failures ? Reason::kFailedRequeued : Reason::kFailed;
  }
  // The no-progress breaker: rather than requeue forever a job that commits no new checkpoint.
  if (records::is_requeue(reason) && knobs.max_no_progress > 0 && e.stalled &&
      *e.stalled >= knobs.max_no_progress) {
    reason = Reason::kNoProgress;
  }
  return reason;
}

bool stops_run(const Knobs& knobs, records::Cause cause) {
  return std::find(knobs.stop_on.begin(), knobs.stop_on.end(), cause) != knobs.stop_on.end();
}

bool exclusion_fits(int64_t total, size_t excluded, int64_t need) {
  return excluded > 0 && total - static_cast<int64_t>(excluded) >= need;
}

std::optional<Verdict> find_verdict(const std::vector<records::MetricsRecord>& records,
                                    const std::string& tag) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    const auto* r = std::get_if<records::SuspectsRecord>(&*it);
    if (!r || r->tag != tag) continue;
    Verdict v;
    v.kind = r->kind;
    for (const auto& h : r->hosts) {
      if (is_node_name(h)) v.hosts.push_back(h);
    }
    if (r->wall_time && std::isfinite(*r->wall_time)) v.wall_time = *r->wall_time;
    // The ledger's detected_by quotes it: a sentence, not a stack.
    v.message = r->message.substr(0, 240);
    return v;
  }
  return std::nullopt;
}

std::optional<std::string> node_of_host(const std::string& host, const Nodes& nodes) {
  if (contains(nodes, host)) return host;
  const auto is_address = [](const std::string& name) {
    return name.find_first_not_of("0123456789.") == std::string::npos;
  };
  const auto short_name = [](const std::string& name) { return name.substr(0, name.find('.')); };
  if (host.empty() || is_address(host)) return std::nullopt;
  std::optional<std::string> found;
  for (const auto& n : nodes) {
    if (is_address(n) || short_name(n) != short_name(host)) continue;
    if (found) return std::nullopt;
    found = n;
  }
  return found;
}

std::optional<std::string> host_of_line(std::string_view line) {
  static const std::regex kWorker(R"(^\[(?:rank [0-9]+/[0-9]+ )?([A-Za-z0-9._-]+)\] )");
  static const std::regex kNccl(R"(^([A-Za-z0-9._-]+):[0-9]+:[0-9]+ \[[0-9]+\] NCCL )");
  const std::string text(line);
  std::smatch m;
  if (std::regex_search(text, m, kWorker) || std::regex_search(text, m, kNccl)) {
    return m[1].str();
  }
  return std::nullopt;
}

std::optional<FaultyNode> gpu_fault(const std::vector<std::string>& lines, const Nodes& nodes) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (cause_of_line(*it) != records::Cause::kGpuHardware) continue;
    const auto host = host_of_line(*it);
    if (!host) continue;
    if (const auto node = node_of_host(*host, nodes)) return FaultyNode{*node, *it};
  }
  return std::nullopt;
}

std::optional<double> find_started(const std::vector<records::MetricsRecord>& records,
                                   const std::string& tag) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    const auto* r = std::get_if<records::StartedRecord>(&*it);
    if (!r || r->tag != tag) continue;
    if (!r->wall_time || !std::isfinite(*r->wall_time)) return std::nullopt;
    return *r->wall_time;
  }
  return std::nullopt;
}

}  // namespace hpctrain::supervisor
