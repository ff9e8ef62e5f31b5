#include "dist/hang_verdict.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <sstream>

namespace hpctrain::dist {

void end_rank(const HangOptions& o, int status, const std::string& line) {
  if (o.on_end) {
    o.on_end(status, line);
    throw RankEnded{status};
  }
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(status);
}

progress::Snapshot current_progress(const HangOptions& o) {
  return o.progress ? o.progress() : progress::snapshot();
}
namespace {

// A hang verdict's first line (encode_hang_verdict()).
const std::string kHangTag = "hang\n";

// "1, 3, 5" (at most `most`, then "and N more").
std::string rank_list(const std::vector<int>& ranks, size_t most = 8) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < most; ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > most) out += " and " + std::to_string(ranks.size() - most) + " more";
  return out;
}

}  // namespace

std::chrono::milliseconds hang_limit(const HangOptions& o,
                                     const std::vector<double>& step_seconds) {
  if (o.hang_timeout.count() > 0) return o.hang_timeout;
  if (step_seconds.empty()) return o.hang_floor;
  std::vector<double> sorted = step_seconds;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const auto ten =
      std::chrono::milliseconds(static_cast<int64_t>(10000 * sorted[sorted.size() / 2]));
  return std::max(o.hang_floor, ten);
}

std::optional<std::chrono::milliseconds> hang_allowance(const progress::Snapshot& s,
                                                        std::chrono::milliseconds limit,
                                                        const HangOptions& o) {
  // Not watched: start-up, the first step of the process (NCCL's communicators are made in its
  // first collective, cuDNN tunes its kernels: minutes on a large job), finishing.
  if (s.phase == progress::Phase::kStarting || s.phase == progress::Phase::kFinishing ||
      s.step <= s.first) {
    return std::nullopt;
  }
  // A save may take as long as its commit may: the larger of the two, whichever is set lower.
  return s.phase == progress::Phase::kCheckpoint ? std::max(limit, o.checkpoint_timeout) : limit;
}

Beat beat_state(std::chrono::milliseconds age, std::chrono::milliseconds beat_interval) {
  if (age >= 3 * beat_interval) return Beat::kSilent;
  return 2 * age >= 3 * beat_interval ? Beat::kLate : Beat::kOnTime;
}

namespace {

// " (node2)", or "" when the host is unknown.
std::string host_text(const RankView& v) { return v.host.empty() ? "" : " (" + v.host + ")"; }

// "data wait at step 5"
std::string at_text(const progress::Snapshot& s) {
  return progress::phase_name(s.phase, s.detail) + " at step " + std::to_string(s.step);
}

// "rank 1 (node2) silent for 5.2 s (no heartbeat; last heard in data wait at step 8)": its last
// published progress, never a step its start-up snapshot only stands in for.
std::string silent_text(int rank, const RankView& v) {
  std::string last = "nothing heard since its start-up";
  if (v.where && v.where->phase != progress::Phase::kStarting) {
    last = "last heard in " + at_text(*v.where);
  }
  return "rank " + std::to_string(rank) + host_text(v) + " silent for " + seconds_text(v.beat_age) +
         " (no heartbeat; " + last + ")";
}

// The ranks furthest behind among those that published progress: the lowest step, then the
// earliest phase of it.
std::vector<int> furthest_behind(const std::vector<RankView>& ranks) {
  std::pair<int64_t, int> behind{INT64_MAX, INT32_MAX};
  for (const auto& v : ranks) {
    if (v.where) behind = std::min(behind, {v.where->step, static_cast<int>(v.where->phase)});
  }
  std::vector<int> out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const auto& s = ranks[r].where;
    if (s && std::pair<int64_t, int>{s->step, static_cast<int>(s->phase)} == behind) {
      out.push_back(static_cast<int>(r));
    }
  }
  return out;
}

}  // namespace

std::optional<HangVerdict> hang_verdict(const std::vector<RankView>& ranks,
                                        std::chrono::milliseconds limit,
                                        std::chrono::milliseconds longest,
                                        std::chrono::milliseconds beat_interval) {
  HangVerdict v;
  for (size_t r = 0; r < ranks.size(); ++r) {
    // A rank that has finished stops beating as it leaves: that is no silence.
    const auto& where = ranks[r].where;
    if (where && where->phase == progress::Phase::kFinishing) continue;
    switch (beat_state(ranks[r].beat_age, beat_interval)) {
      case Beat::kLate:
        return std::nullopt;
      case Beat::kSilent:
        v.silent.push_back(static_cast<int>(r));
        break;
      case Beat::kOnTime:
        break;
    }
  }
  v.named = v.silent.empty() ? furthest_behind(ranks) : v.silent;
  std::map<std::string, std::vector<int>> others;  // "agreement at step 12" -> ranks
  std::ostringstream message;
  message << "hang: no progress for " << seconds_text(longest) << " (hang timeout "
          << seconds_text(limit) << "): ";
  bool first = true;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankView& view = ranks[r];
    const int rank = static_cast<int>(r);
    if (std::find(v.named.begin(), v.named.end(), rank) == v.named.end()) {
      if (view.where) others[at_text(*view.where)].push_back(rank);
      continue;
    }
    message << (first ? "" : ", ");
    first = false;
    if (!v.silent.empty()) {
      message << silent_text(rank, view);
    } else {
      message << "rank " << rank << host_text(view) << " in " << at_text(*view.where) << " for "
              << seconds_text(view.still);
    }
  }
  if (others.empty()) {
    message << " (every rank)";
  } else {
    message << "; the others wait: ";
    first = true;
    for (const auto& [at, ranks_at] : others) {
      message << (first ? "" : ", ") << (ranks_at.size() == 1 ? "rank " : "ranks ")
              << rank_list(ranks_at) << " in " << at;
      first = false;
    }
  }
  v.message = message.str();
  return v;
}

namespace {

std::string join_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (const int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
  return out;
}

// "1,3" -> {1, 3}
std::vector<int> parse_ranks(const std::string& line) {
  std::vector<int> ranks;
  std::istringstream in(line);
  for (std::string r; std::getline(in, r, ',');) {
    if (!r.empty()) ranks.push_back(std::stoi(r));
  }
  return ranks;
}

}  // namespace

std::string encode_hang_verdict(const HangVerdict& v) {
  return kHangTag + join_ranks(v.named) + "\n" + join_ranks(v.silent) + "\n" + v.message;
}

std::optional<HangVerdict> decode_hang_verdict(const std::string& text) {
  if (text.rfind(kHangTag, 0) != 0) return std::nullopt;
  std::istringstream in(text.substr(kHangTag.size()));
  std::string named_line, silent_line;
  HangVerdict v;
  std::getline(in, named_line);
  std::getline(in, silent_line);
  std::getline(in, v.message, '\0');
  v.named = parse_ranks(named_line);
  v.silent = parse_ranks(silent_line);
  return v;
}

ProgressWatch::ProgressWatch(int world_size)
    : where_(static_cast<size_t>(world_size)), progressed_(static_cast<size_t>(world_size)) {}

void ProgressWatch::observe(int rank, const std::optional<progress::Snapshot>& s,
                            Clock::time_point now) {
  if (!started_) {
    std::fill(progressed_.begin(), progressed_.end(), now);
    started_ = true;
  }
  if (!s) return;
  auto& last = where_[static_cast<size_t>(rank)];
  if (!last || last->counter != s->counter) progressed_[static_cast<size_t>(rank)] = now;
  last = s;
}

std::chrono::milliseconds ProgressWatch::still(size_t rank, Clock::time_point now) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - progressed_[rank]);
}

// Rank 0's step times, for the automatic timeout: between two observations of a new step.
void ProgressWatch::note_step_time(Clock::time_point now) {
  if (where_.empty() || !where_[0]) return;
  const int64_t step = where_[0]->step;
  if (step == seen_step_) return;
  if (seen_step_ >= 0 && step > seen_step_) {
    if (step_seconds_.size() == 64) step_seconds_.erase(step_seconds_.begin());
    step_seconds_.push_back(std::chrono::duration<double>(now - seen_step_at_).count() /
                            static_cast<double>(step - seen_step_));
  }
  seen_step_ = step;
  seen_step_at_ = now;
}

std::optional<HangVerdict> ProgressWatch::check(
    Clock::time_point now, const HangOptions& o,
    const std::vector<std::chrono::milliseconds>& beat_ages, const std::vector<std::string>& hosts,
    std::chrono::milliseconds beat_interval) {
  note_step_time(now);
  const auto limit = hang_limit(o, step_seconds_);
  std::chrono::milliseconds longest{0};
  for (size_t r = 0; r < where_.size(); ++r) {
    if (!where_[r]) continue;
    const auto allowed = hang_allowance(*where_[r], limit, o);
    if (allowed && still(r, now) >= *allowed) longest = std::max(longest, still(r, now));
  }
  if (longest.count() == 0) return std::nullopt;
  std::vector<RankView> views(where_.size());
  for (size_t r = 0; r < where_.size(); ++r) {
    views[r].where = where_[r];
    views[r].still = still(r, now);
    if (r < beat_ages.size()) views[r].beat_age = beat_ages[r];
    if (r < hosts.size()) views[r].host = hosts[r];
  }
  return hang_verdict(views, limit, longest, beat_interval);
}

}  // namespace hpctrain::dist
