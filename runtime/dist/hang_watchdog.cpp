#include "dist/hang_watchdog.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/error.hpp"
#include "dist/stack_dump.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;

// Set by a rank named in a hang verdict once its stacks are printed.
std::string stacks_key(int rank) { return "hb/stacks/" + std::to_string(rank); }
// Set by a rank once it has a hang verdict: rank 0, which serves the store, waits for these.
std::string heard_key(int rank) { return "hb/heard/" + std::to_string(rank); }

bool among(const std::vector<int>& ranks, int r) {
  return std::find(ranks.begin(), ranks.end(), r) != ranks.end();
}

// One line on stderr in one write (the process is about to _exit).
void say(const std::string& line) {
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

HangWatchdog::HangWatchdog(HangOptions options, int rank, int world_size,
                           std::shared_ptr<const std::vector<std::string>> hosts,
                           std::chrono::milliseconds beat_interval)
    : o_(std::move(options)),
      rank_(rank),
      world_size_(world_size),
      hosts_(std::move(hosts)),
      interval_(beat_interval),
      progress_(rank == 0 ? world_size : 0) {}  // only rank 0 watches

std::optional<HangVerdict> HangWatchdog::watch_reported(
    Clock::time_point now, const std::vector<std::optional<progress::Snapshot>>& where,
    const std::vector<std::chrono::milliseconds>& beat_ages) {
  progress_.observe(0, current_progress(o_), now);
  for (int r = 1; r < world_size_ && static_cast<size_t>(r) < where.size(); ++r) {
    progress_.observe(r, where[static_cast<size_t>(r)], now);
  }
  static const std::vector<std::string> unknown;
  auto verdict = progress_.check(now, o_, beat_ages, hosts_ ? *hosts_ : unknown, interval_);
  // nullopt also while a beat is late: decided at the next one, when it has come or not.
  if (!verdict) return std::nullopt;
  if (o_.on_hang) {
    try {
      o_.on_hang(verdict->named, verdict->message);
    } catch (const std::exception& e) {
      say(rt::rank_prefix() + "could not record the hang: " + e.what() + "\n");
    }
  }
  return verdict;
}

void HangWatchdog::carry_out(KvStore& store, const std::string& why, const HangVerdict& verdict) {
  ending_.store(true);
  const bool me = among(verdict.named, rank_);
  const std::string line = rt::rank_prefix() + why + "; stopping this rank (exit status " +
                           std::to_string(o_.hang_exit_status) + ")\n";
  if (!o_.on_end) say(line);
  try {
    store.set(heard_key(rank_), "1");
  } catch (const std::exception&) {
    end_rank(o_, o_.hang_exit_status, o_.on_end ? line : "");  // the store is gone
  }
  if (me && o_.dump_stacks) print_thread_stacks();
  try {
    if (me) store.set(stacks_key(rank_), "1");
    wait_for_the_others(store, verdict);
  } catch (const std::exception&) {
    // The store is gone (rank 0 has exited): nobody is left to wait for.
  }
  end_rank(o_, o_.hang_exit_status, o_.on_end ? line : "");
}

// Srun ends a step's other tasks once one exits non-zero, so the ranks not named wait (up to the
// stack dump's deadline) until each named rank says its stacks are out, except the silent ones:
// a stopped process prints nothing. Rank 0 meanwhile keeps serving the store they say it through,
// and first waits (a few beats at most) until every rank not silent has the verdict.
void HangWatchdog::wait_for_the_others(KvStore& store, const HangVerdict& verdict) const {
  if (rank_ == 0) {
    const auto deadline = Clock::now() + 5 * interval_;
    for (int r = 1; r < world_size_; ++r) {
      if (among(verdict.silent, r)) continue;
      while (!store.check(heard_key(r)) && Clock::now() < deadline) {
        std::this_thread::sleep_for(interval_ / 10);
      }
    }
  }
  const auto deadline = Clock::now() + kStackDumpDeadline + 10s;
  for (const int r : verdict.named) {
    if (r == rank_ || among(verdict.silent, r)) continue;
    while (!store.check(stacks_key(r)) && Clock::now() < deadline) {
      std::this_thread::sleep_for(200ms);
    }
  }
}

}  // namespace hpctrain::dist
