#include "dist/heartbeat.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "common/process.hpp"
#include "dist/progress.hpp"
#include "spec/spec.hpp"

namespace hpctrain::dist {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string beat_key(int rank) { return "hb/beat/" + std::to_string(rank); }
std::string left_key(int rank) { return "hb/left/" + std::to_string(rank); }
std::string where_key(int rank) { return "hb/where/" + std::to_string(rank); }
// Set by a rank named in a hang verdict once its stacks are printed.
std::string stacks_key(int rank) { return "hb/stacks/" + std::to_string(rank); }
// Set by a rank once it has a hang verdict: rank 0, which serves the store, waits for these.
std::string heard_key(int rank) { return "hb/heard/" + std::to_string(rank); }
// How long gdb may take to print a hung rank's stacks.
constexpr std::chrono::seconds kStackDeadline{60};
const std::string kVerdictKey = "hb/verdict";
// A hang verdict: "hang\n<ranks named>\n<the silent ones among them>\n<the message>", the
// ranks comma-separated.
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

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string seconds_text(std::chrono::milliseconds d) {
  const auto tenths = d.count() / 100;
  return std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : "") +
         " s";
}

}  // namespace

struct Heartbeat::State {
  c10::intrusive_ptr<c10d::Store> store;
  HeartbeatOptions o;
  std::chrono::milliseconds interval{1000};

  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;         // guarded by mutex: the threads return
  bool leave_requested = false;  // guarded by mutex
  bool left = false;             // guarded by mutex: the beat thread has said goodbye
  int running = 0;               // guarded by mutex: threads not yet returned
  std::atomic<bool> leaving{false};
  // A hang verdict is being carried out (stacks, then exit): the store going quiet meanwhile (rank
  // 0 has exited) is expected and must not turn it into a lost-store exit.
  std::atomic<bool> ending{false};
  std::atomic<Clock::rep> last_ok{Clock::now().time_since_epoch().count()};

  // Rank 0's hang watch: every rank's last published progress and when its counter last moved,
  // and rank 0's step times (for the automatic timeout).
  std::vector<std::optional<progress::Snapshot>> where;
  std::vector<Clock::time_point> progressed;
  int64_t seen_step = -1;
  Clock::time_point seen_step_at;
  std::vector<double> step_seconds;  // the last 64 (seconds per step between observations)
  // Rank 0's watch of the beats: every rank's last beat counter and when it last moved.
  std::vector<int64_t> beat_seen;
  std::vector<Clock::time_point> beat_moved;

  std::string host(int rank) const {
    if (rank >= 0 && static_cast<size_t>(rank) < o.hosts.size() && !o.hosts[rank].empty()) {
      return " (" + o.hosts[rank] + ")";
    }
    return "";
  }

  // Ends the process: the verdict on stderr in one write, no destructors, no atexit handlers
  // (the main thread may be inside a collective that will never return).
  [[noreturn]] void lost(const std::string& why) const {
    const std::string line = rt::rank_prefix() + why + "; stopping this rank (exit status " +
                             std::to_string(o.exit_status) + ") so the job can recover\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(o.exit_status);
  }

  // Ends the process for a hang: the verdict, this rank's threads' stacks when it is one of
  // `named`, then hang_exit_status. Srun ends a step's other tasks once one exits non-zero, so
  // the ranks not named wait (up to the stack dump's deadline) until each named rank says its
  // stacks are out, except the `silent` ones: a stopped process prints nothing. Rank 0 meanwhile
  // keeps serving the store they say it through, and first waits (a few beats at most) until
  // every rank not silent has the verdict.
  [[noreturn]] void hung(const std::string& why, const std::vector<int>& named,
                         const std::vector<int>& silent) {
    ending.store(true);
    const auto among = [](const std::vector<int>& ranks, int r) {
      return std::find(ranks.begin(), ranks.end(), r) != ranks.end();
    };
    const bool me = among(named, o.rank);
    const std::string line = rt::rank_prefix() + why + "; stopping this rank (exit status " +
                             std::to_string(o.hang_exit_status) + ")\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    try {
      store->set(heard_key(o.rank), "1");
    } catch (const std::exception&) {
      ::_exit(o.hang_exit_status);  // the store is gone: nobody is left to wait for
    }
    if (me && o.dump_stacks) print_stacks();
    try {
      if (me) store->set(stacks_key(o.rank), "1");
      if (o.rank == 0) {
        const auto deadline = Clock::now() + 5 * interval;
        for (int r = 1; r < o.world_size; ++r) {
          if (among(silent, r)) continue;
          while (!store->check({heard_key(r)}) && Clock::now() < deadline) {
            std::this_thread::sleep_for(interval / 10);
          }
        }
      }
      const auto deadline = Clock::now() + kStackDeadline + 10s;
      for (const int r : named) {
        if (r == o.rank || among(silent, r)) continue;
        while (!store->check({stacks_key(r)}) && Clock::now() < deadline) {
          std::this_thread::sleep_for(200ms);
        }
      }
    } catch (const std::exception&) {
      // The store is gone (rank 0 has exited): nobody is left to wait for.
    }
    ::_exit(o.hang_exit_status);
  }

  // This rank's threads' stacks on stderr, as gdb sees them (up to kStackDeadline).
  void print_stacks() const {
    // gdb attaches to this process from a child: allowed under Yama's ptrace_scope 1 only when
    // the process says so.
    ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    const auto r = common::run_command({"gdb", "-p", std::to_string(::getpid()), "-batch", "-nx",
                                        "-ex", "set pagination off", "-ex", "thread apply all bt"},
                                       kStackDeadline, 1 << 20);
    std::string dump = rt::rank_prefix() + "the threads of this rank, as gdb sees them:\n";
    if (r.not_found) {
      dump = rt::rank_prefix() + "no stacks: gdb is not on PATH\n";
    } else {
      dump += r.out;
      if (r.exit_status != 0 || r.timed_out) {
        dump += rt::rank_prefix() + "gdb " +
                (r.timed_out ? "timed out" : "exited " + std::to_string(r.exit_status)) + ": " +
                first_line(r.err) + "\n";
      }
    }
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, dump.data(), dump.size());
  }

  // Sleeps for `d` unless told to stop (or, for the beat thread, to leave); false when stopping.
  bool pause(std::chrono::milliseconds d, bool wake_to_leave) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait_for(lock, d,
                     [&] { return stopping || (wake_to_leave && leave_requested && !left); });
    return !stopping;
  }

  void returned() {
    std::lock_guard<std::mutex> lock(mutex);
    --running;
    changed.notify_all();
  }

  // Store traffic: this rank's beat, and rank 0's watch over everyone's.
  void beat_loop() {
    beat_seen.assign(static_cast<size_t>(o.world_size), -1);
    beat_moved.assign(static_cast<size_t>(o.world_size), Clock::now());
    try {
      while (pause(interval, /*wake_to_leave=*/true)) {
        bool leave_now = false;
        {
          std::lock_guard<std::mutex> lock(mutex);
          leave_now = leave_requested && !left;
        }
        if (leave_now) {
          say_goodbye();
          break;
        }
        store->add(beat_key(o.rank), 1);
        if (o.rank == 0) {
          watch_counters();
          watch_progress();
        } else {
          store->set(where_key(o.rank), progress::encode(progress::snapshot()));
          if (store->check({kVerdictKey})) {
            const auto v = store->get(kVerdictKey);
            read_verdict(std::string(v.begin(), v.end()));
          }
        }
        last_ok.store(Clock::now().time_since_epoch().count());
      }
    } catch (const std::exception& e) {
      if (!leaving.load()) {
        lost("lost the store on rank 0" + host(0) + " at " + o.store_address + ": " +
             first_line(e.what()));
      }
    }
    returned();
  }

  // Rank 0's reads, a round trip each whatever the world size (multiGet): every rank's beat
  // counter, and the progress of every rank that has published it. The counters are made once
  // (add 0), and a rank's progress key is looked for alone until it exists: multiGet would wait
  // for a key that is not there.
  std::vector<std::string> beat_keys;
  std::vector<int> where_ranks;  // ranks > 0 whose progress key exists
  std::vector<char> where_known;

  static int64_t parse_counter(const std::vector<uint8_t>& bytes) {
    try {
      return std::stoll(std::string(bytes.begin(), bytes.end()));
    } catch (const std::exception&) {
      return -1;
    }
  }

  void watch_counters() {
    const auto now = Clock::now();
    beat_moved[0] = now;  // this thread is rank 0's beat
    if (beat_keys.empty()) {
      for (int r = 1; r < o.world_size; ++r) {
        store->add(beat_key(r), 0);
        beat_keys.push_back(beat_key(r));
      }
    }
    const auto values =
        beat_keys.empty() ? std::vector<std::vector<uint8_t>>{} : store->multiGet(beat_keys);
    for (int r = 1; r < o.world_size; ++r) {
      const int64_t value = parse_counter(values[static_cast<size_t>(r - 1)]);
      if (value != beat_seen[r]) {
        beat_seen[r] = value;
        beat_moved[r] = now;
        continue;
      }
      const auto silent = beat_age(r, now);
      if (silent < o.timeout || store->check({left_key(r)})) continue;
      const std::string verdict =
          "lost rank " + std::to_string(r) + host(r) + ": no heartbeat for " + seconds_text(silent);
      store->set(kVerdictKey, verdict);
      // The others read the verdict on their next beat; this process serves the store.
      std::this_thread::sleep_for(interval + interval / 2);
      lost(verdict);
    }
  }

  // How long since rank 0 last saw rank `r`'s beat counter move.
  std::chrono::milliseconds beat_age(int r, Clock::time_point now) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        now - beat_moved[static_cast<size_t>(r)]);
  }

  void read_verdict(const std::string& v) {
    if (v.rfind(kHangTag, 0) != 0) lost("rank 0 reports: " + v);
    std::istringstream in(v.substr(kHangTag.size()));
    std::string named_line, silent_line, message;
    std::getline(in, named_line);
    std::getline(in, silent_line);
    std::getline(in, message, '\0');
    hung("rank 0 reports: " + message, parse_ranks(named_line), parse_ranks(silent_line));
  }

  // "1,3" -> {1, 3}
  static std::vector<int> parse_ranks(const std::string& line) {
    std::vector<int> ranks;
    std::istringstream in(line);
    for (std::string r; std::getline(in, r, ',');) {
      if (!r.empty()) ranks.push_back(std::stoi(r));
    }
    return ranks;
  }

  static std::string join_ranks(const std::vector<int>& ranks) {
    std::string out;
    for (const int r : ranks) out += (out.empty() ? "" : ",") + std::to_string(r);
    return out;
  }

  // Rank 0: reads every rank's progress; when one has not moved past its limit, names the ranks
  // the others wait for (hang_verdict()) and ends the job (hung()).
  void watch_progress() {
    const auto now = Clock::now();
    read_progress(now);
    note_step_time(now);
    const auto limit = hang_limit(o, step_seconds);
    std::chrono::milliseconds longest{0};
    for (int r = 0; r < o.world_size; ++r) {
      const auto& s = where[static_cast<size_t>(r)];
      if (!s) continue;
      const auto allowed = hang_allowance(*s, limit, o);
      if (allowed && still(r, now) >= *allowed) longest = std::max(longest, still(r, now));
    }
    if (longest.count() == 0) return;
    const auto found = hang_verdict(views(now), limit, longest, interval);
    if (!found) return;  // a beat is late: decided at the next one, when it has come or not
    const HangVerdict& verdict = *found;
    if (o.on_hang) {
      try {
        o.on_hang(verdict.named, verdict.message);
      } catch (const std::exception& e) {
        const std::string line =
            rt::rank_prefix() + "could not record the hang: " + e.what() + "\n";
        [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
      }
    }
    store->set(kVerdictKey, kHangTag + join_ranks(verdict.named) + "\n" +
                                join_ranks(verdict.silent) + "\n" + verdict.message);
    // The others read the verdict on their next beat; hung() keeps this process, which serves
    // the store, until they have.
    hung(verdict.message, verdict.named, verdict.silent);
  }

  // What rank 0 knows of every rank, for the verdict.
  std::vector<RankView> views(Clock::time_point now) const {
    std::vector<RankView> out(static_cast<size_t>(o.world_size));
    for (int r = 0; r < o.world_size; ++r) {
      auto& v = out[static_cast<size_t>(r)];
      v.where = where[static_cast<size_t>(r)];
      v.still = still(r, now);
      v.beat_age = beat_age(r, now);
      if (static_cast<size_t>(r) < o.hosts.size()) v.host = o.hosts[static_cast<size_t>(r)];
    }
    return out;
  }

  // How long rank `r`'s progress has stood still.
  std::chrono::milliseconds still(int r, Clock::time_point now) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
        now - progressed[static_cast<size_t>(r)]);
  }

  // Every rank's progress into `where` (rank 0's own, the others' from the store), and when each
  // last moved.
  void read_progress(Clock::time_point now) {
    if (where.empty()) {
      where.resize(static_cast<size_t>(o.world_size));
      progressed.assign(static_cast<size_t>(o.world_size), now);
    }
    if (where_known.empty()) where_known.assign(static_cast<size_t>(o.world_size), 0);
    for (int r = 1; r < o.world_size; ++r) {
      if (!where_known[static_cast<size_t>(r)] && store->check({where_key(r)})) {
        where_known[static_cast<size_t>(r)] = 1;
        where_ranks.push_back(r);
      }
    }
    std::vector<std::string> keys;
    for (const int r : where_ranks) keys.push_back(where_key(r));
    const auto values = keys.empty() ? std::vector<std::vector<uint8_t>>{} : store->multiGet(keys);
    const auto observe = [&](int r, std::optional<progress::Snapshot> s) {
      if (!s) return;
      auto& last = where[static_cast<size_t>(r)];
      if (!last || last->counter != s->counter) progressed[static_cast<size_t>(r)] = now;
      last = s;
    };
    observe(0, progress::snapshot());
    for (size_t i = 0; i < where_ranks.size(); ++i) {
      observe(where_ranks[i], progress::parse(std::string(values[i].begin(), values[i].end())));
    }
  }

  // Rank 0's step times, for the automatic timeout: between two observations of a new step.
  void note_step_time(Clock::time_point now) {
    const int64_t step = where[0]->step;
    if (step == seen_step) return;
    if (seen_step >= 0 && step > seen_step) {
      if (step_seconds.size() == 64) step_seconds.erase(step_seconds.begin());
      step_seconds.push_back(std::chrono::duration<double>(now - seen_step_at).count() /
                             static_cast<double>(step - seen_step));
    }
    seen_step = step;
    seen_step_at = now;
  }

  void say_goodbye() {
    // Leaving is not hanging: rank 0's watch passes over a rank that finished.
    progress::Snapshot done = progress::snapshot();
    done.phase = progress::Phase::kFinishing;
    if (o.rank != 0) store->set(where_key(o.rank), progress::encode(done));
    store->set(left_key(o.rank), "1");
    if (o.rank == 0) {
      // The store lives in this process: wait until every rank has left before it goes.
      const auto deadline = Clock::now() + o.timeout;
      for (int r = 1; r < o.world_size && Clock::now() < deadline; ++r) {
        while (!store->check({left_key(r)}) && Clock::now() < deadline) {
          std::this_thread::sleep_for(50ms);
        }
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    left = true;
    changed.notify_all();
  }

  // No store traffic: notices when the beats stop succeeding (a round trip that hangs, as on a
  // cut link, never throws).
  void watch_loop() {
    while (pause(interval / 2, /*wake_to_leave=*/false)) {
      if (leaving.load() || ending.load()) continue;
      const auto last = Clock::time_point(Clock::duration(last_ok.load()));
      const auto silent =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last);
      if (silent >= o.timeout) {
        lost("no answer from the store on rank 0" + host(0) + " at " + o.store_address + " for " +
             seconds_text(silent) + " (rank 0's node, or this node's link, is gone)");
      }
    }
    returned();
  }
};

HeartbeatOptions heartbeat_options_from_spec(const spec::Spec& spec) {
  HeartbeatOptions o;
  o.timeout = std::chrono::seconds(spec.resilience.heartbeat_timeout_s);
  o.exit_status = kExitPeerLost;
  o.hang_timeout = std::chrono::seconds(spec.resilience.hang_timeout_s);
  o.checkpoint_timeout = std::chrono::seconds(spec.checkpoint.commit_timeout_s);
  o.hang_exit_status = kExitHang;
  return o;
}

std::chrono::milliseconds hang_limit(const HeartbeatOptions& o,
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
                                                        const HeartbeatOptions& o) {
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

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> store, HeartbeatOptions options)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->o = std::move(options);
  // Five beats per timeout, at most one a second.
  state_->interval = std::min<std::chrono::milliseconds>(1000ms, state_->o.timeout / 5);
  state_->store->setTimeout(state_->o.timeout);
  state_->store->add(beat_key(state_->o.rank), 1);
  if (state_->o.rank != 0) {
    state_->store->set(where_key(state_->o.rank), progress::encode(progress::snapshot()));
  }
  state_->running = 2;
  // The threads hold the state: if one is stuck in a store call when this object goes, it is
  // left behind rather than waited for.
  std::thread([s = state_] { s->beat_loop(); }).detach();
  std::thread([s = state_] { s->watch_loop(); }).detach();
}

void Heartbeat::leave() {
  state_->leaving.store(true);
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->leave_requested = true;
  state_->changed.notify_all();
  state_->changed.wait_for(lock, state_->o.timeout + 2s, [&] { return state_->left; });
}

Heartbeat::~Heartbeat() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->changed.notify_all();
  state_->changed.wait_for(lock, 2s, [&] { return state_->running == 0; });
}

}  // namespace hpctrain::dist
