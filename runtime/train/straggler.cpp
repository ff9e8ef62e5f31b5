#include "train/straggler.hpp"

#include <algorithm>
#include <cstdio>

#include "spec/spec.hpp"

namespace hpctrain::train {

RankSpread compare_ranks(const std::vector<double>& p50) {
  RankSpread out;
  if (p50.empty()) return out;
  std::vector<double> sorted = p50;
  std::sort(sorted.begin(), sorted.end());
  out.median_s = sorted[sorted.size() / 2];
  out.slowest = std::max_element(p50.begin(), p50.end()) - p50.begin();
  out.slowest_s = p50[out.slowest];
  out.behind = out.median_s > 0 && out.slowest_s > RankSpread::kBehindRatio * out.median_s &&
               out.slowest_s - out.median_s > RankSpread::kBehindMarginS;
  return out;
}

std::map<std::string, double> node_busy_times(const std::vector<std::string>& hosts,
                                              const std::vector<double>& p50) {
  std::map<std::string, double> node_busy;
  for (size_t rank = 0; rank < hosts.size() && rank < p50.size(); ++rank) {
    double& b = node_busy[hosts[rank]];
    b = std::max(b, p50[rank]);
  }
  return node_busy;
}

std::optional<StragglerVerdict> StragglerWatch::observe(
    const std::map<std::string, double>& node_busy) {
  if (node_busy.size() < 2) return std::nullopt;
  std::vector<double> sorted;
  for (const auto& [node, busy] : node_busy) sorted.push_back(busy);
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[(sorted.size() - 1) / 2];  // the lower one: half may be slow
  // The first of equally slow nodes in name order.
  const auto slowest =
      std::max_element(node_busy.begin(), node_busy.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  if (!(slowest->second > ratio_ * median && slowest->second - median > kMarginS)) {
    streak_ = 0;
    node_.clear();
    return std::nullopt;
  }
  streak_ = slowest->first == node_ ? streak_ + 1 : 1;
  node_ = slowest->first;
  if (streak_ < windows_) return std::nullopt;
  return StragglerVerdict{node_, slowest->second, median, streak_};
}

StragglerWatch straggler_watch_from_spec(const spec::ResilienceSpec& resilience) {
  return StragglerWatch(resilience.straggler_ratio, resilience.straggler_windows);
}

StragglerMonitor straggler_monitor_from_spec(const spec::ResilienceSpec& resilience,
                                             std::vector<std::string> hosts) {
  return StragglerMonitor(resilience.evict_stragglers, straggler_watch_from_spec(resilience),
                          std::move(hosts));
}

std::optional<RankSpread> StragglerMonitor::compare(const std::vector<double>& p50) const {
  if (p50.size() < 2) return std::nullopt;
  return compare_ranks(p50);
}

std::optional<std::string> StragglerMonitor::host(int64_t rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= hosts_.size()) return std::nullopt;
  return hosts_[static_cast<size_t>(rank)];
}

std::optional<Eviction> StragglerMonitor::watch(const std::vector<double>& p50) {
  if (!evict_ || hosts_.size() != p50.size()) return std::nullopt;
  const auto verdict = watch_.observe(node_busy_times(hosts_, p50));
  if (!verdict) return std::nullopt;
  char text[320];
  std::snprintf(text, sizeof text,
                "straggler: node %s busy %.3f s a step (its slowest rank's p50), %.1fx the "
                "nodes' median %.3f s, for %lld log windows in a row",
                verdict->node.c_str(), verdict->busy_s, verdict->busy_s / verdict->median_s,
                verdict->median_s, static_cast<long long>(verdict->windows));
  Eviction e{verdict->node, {}, text};
  for (size_t rank = 0; rank < hosts_.size(); ++rank) {
    if (hosts_[rank] == verdict->node) e.ranks.push_back(static_cast<int>(rank));
  }
  return e;
}

}  // namespace hpctrain::train
