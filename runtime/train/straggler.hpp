// The straggler verdicts, torch-free so that their tests need no libtorch.
//
// The log window's (docs/resilience.md "Stragglers"): compare_ranks() finds the slowest rank of a
// window and says whether it is clearly behind the ranks' median; rank 0 writes that verdict into
// the window's "ranks" record ("behind_rank") and the log line, and `hpctrain report` counts the
// records instead of testing again.
//
// Eviction's (resilience.evict_stragglers, docs/resilience.md "Evicting a straggler"): every log
// window each rank's p50 busy time reaches every rank (the all-reduce of the loss line); each rank
// feeds the same figures to its own StragglerWatch and so reaches the same verdict with no
// message: a node (its busy time is that of its slowest rank) is let go when it is `ratio` times
// the nodes' lower median and kMarginS above it, for `windows` windows in a row, the same node
// each time. The lower median because half the nodes may be slow: with two nodes it is the faster
// one's time.
// Thread safety: compare_ranks() is pure; one watch per trainer, fed from the training thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::spec {
struct ResilienceSpec;
}

namespace hpctrain::train {

// One log window's ranks compared: the slowest (the first of equals) and the ranks' median
// (the upper one of an even count), and whether the slowest is clearly behind: more than
// kBehindRatio times the median and more than kBehindMarginS above it.
struct RankSpread {
  static constexpr double kBehindRatio = 1.5;
  static constexpr double kBehindMarginS = 0.005;

  int64_t slowest = 0;
  double slowest_s = 0;
  double median_s = 0;
  bool behind = false;
};

// `p50`: every rank's busy time in the window, by rank. With fewer than two ranks nobody is
// behind.
RankSpread compare_ranks(const std::vector<double>& p50);

// Each node's busy time: the largest p50 of its ranks (hosts[r] is rank r's node).
std::map<std::string, double> node_busy_times(const std::vector<std::string>& hosts,
                                              const std::vector<double>& p50);

// The node to let go and the figures that say why.
struct StragglerVerdict {
  std::string node;
  double busy_s = 0;    // its busy time in the last window
  double median_s = 0;  // the nodes' lower median in that window
  int64_t windows = 0;  // windows in a row it was behind
};

class StragglerWatch {
 public:
  // Below this margin over the median a node is not behind, whatever the ratio: a loaded
  // machine's scheduling alone makes a node of short steps look slow.
  static constexpr double kMarginS = 0.020;

  StragglerWatch(double ratio, int64_t windows) : ratio_(ratio), windows_(windows) {}

  // One log window's busy time of every node (node_busy_times()). The verdict once the same node
  // has been behind for `windows` windows in a row; nullopt before. With fewer than two nodes
  // nothing is compared and the count stays as it was.
  std::optional<StragglerVerdict> observe(const std::map<std::string, double>& node_busy);

  // Windows in a row the node behind() has been behind (0: nobody is behind now).
  int64_t streak() const { return streak_; }
  const std::string& behind() const { return node_; }

 private:
  double ratio_;
  int64_t windows_;
  int64_t streak_ = 0;
  std::string node_;
};

// The watch resilience.straggler_ratio and resilience.straggler_windows ask for.
StragglerWatch straggler_watch_from_spec(const spec::ResilienceSpec& resilience);

// A straggler's node to let go, with the ranks on it and the sentence that says why.
struct Eviction {
  std::string node;
  std::vector<int> ranks;
  std::string message;  // "straggler: node N busy ... for K log windows in a row"
};

// The trainer's straggler monitor: every log window, the ranks' busy times compared
// (compare_ranks: rank 0 reports the spread) and, with resilience.evict_stragglers, the watch
// fed the nodes' busy times (eviction's verdict; every rank reaches the same).
class StragglerMonitor {
 public:
  // `evict`: resilience.evict_stragglers, judged by `watch`; `hosts`: every rank's host, by
  // rank (empty: unknown; then no node is judged).
  StragglerMonitor(bool evict, StragglerWatch watch, std::vector<std::string> hosts)
      : evict_(evict), watch_(watch), hosts_(std::move(hosts)) {}

  // The window's spread over the ranks (`p50` by rank); nullopt with fewer than two ranks.
  std::optional<RankSpread> compare(const std::vector<double>& p50) const;
  // The host of `rank`, as known (perhaps empty); nullopt when unknown.
  std::optional<std::string> host(int64_t rank) const;
  // Eviction: one window's `p50` of every rank fed to the watch; the node to let go once the
  // watch reaches its verdict. nullopt without evict_stragglers or when the hosts are not one
  // per rank.
  std::optional<Eviction> watch(const std::vector<double>& p50);

 private:
  bool evict_;
  StragglerWatch watch_;
  std::vector<std::string> hosts_;
};

// The monitor the [resilience] keys ask for, over `hosts`.
StragglerMonitor straggler_monitor_from_spec(const spec::ResilienceSpec& resilience,
                                             std::vector<std::string> hosts);

}  // namespace hpctrain::train
