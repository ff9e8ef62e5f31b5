#include "dist/heartbeat.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.hpp"
#include "common/exit_codes.hpp"
#include "dist/hang_watchdog.hpp"
#include "spec/spec.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;

std::string beat_key(int rank) { return "hb/beat/" + std::to_string(rank); }
std::string left_key(int rank) { return "hb/left/" + std::to_string(rank); }
// Rank 0's verdict for the others: a lost rank's, or a hang's (encode_hang_verdict()).
const std::string kVerdictKey = "hb/verdict";

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

int64_t parse_counter(const std::string& text) {
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

struct Heartbeat::State {
  // Rank 0's watch of the others' beats: every rank's last beat counter and when it last moved,
  // read with one multi_get whatever the world size (the counters are made once, add 0, so that
  // multi_get never waits for a key that is not there).
  class PeerBeats {
   public:
    PeerBeats(int world_size, Clock::time_point now)
        : seen_(static_cast<size_t>(world_size), -1),
          moved_(static_cast<size_t>(world_size), now) {}

    // Reads every counter; `on_still(rank, age)` for each rank whose counter has not moved since
    // the last read. Rank 0's own beat is the caller's.
    template <class OnStill>
    void read(KvStore& store, Clock::time_point now, OnStill on_still) {
      const int world_size = static_cast<int>(seen_.size());
      moved_[0] = now;  // this thread is rank 0's beat
      if (keys_.empty()) {
        for (int r = 1; r < world_size; ++r) {
          store.add(beat_key(r), 0);
          keys_.push_back(beat_key(r));
        }
      }
      const auto values = keys_.empty() ? std::vector<std::string>{} : store.multi_get(keys_);
      for (int r = 1; r < world_size; ++r) {
        const int64_t value = parse_counter(values[static_cast<size_t>(r - 1)]);
        if (value != seen_[static_cast<size_t>(r)]) {
          seen_[static_cast<size_t>(r)] = value;
          moved_[static_cast<size_t>(r)] = now;
          continue;
        }
        on_still(r, age(r, now));
      }
    }

    // How long since rank `r`'s beat counter last moved.
    std::chrono::milliseconds age(int r, Clock::time_point now) const {
      return std::chrono::duration_cast<std::chrono::milliseconds>(now -
                                                                   moved_[static_cast<size_t>(r)]);
    }
    std::vector<std::chrono::milliseconds> ages(Clock::time_point now) const {
      std::vector<std::chrono::milliseconds> out;
      for (size_t r = 0; r < moved_.size(); ++r) out.push_back(age(static_cast<int>(r), now));
      return out;
    }

   private:
    std::vector<std::string> keys_;  // ranks 1..N-1
    std::vector<int64_t> seen_;
    std::vector<Clock::time_point> moved_;
  };

  std::unique_ptr<KvStore> store;
  HeartbeatOptions o;
  std::chrono::milliseconds interval{1000};

  // The two threads and leaving.
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;         // guarded by mutex: the threads return
  bool leave_requested = false;  // guarded by mutex
  bool left = false;             // guarded by mutex: the beat thread has said goodbye
  int running = 0;               // guarded by mutex: threads not yet returned
  std::atomic<bool> leaving{false};

  // When this rank's store traffic last succeeded (the watch thread's clock).
  std::atomic<Clock::rep> last_ok{Clock::now().time_since_epoch().count()};
  std::optional<PeerBeats> peers;  // rank 0's
  std::optional<HangWatchdog> hang;

  std::string host(int rank) const {
    if (rank >= 0 && static_cast<size_t>(rank) < o.hosts.size() && !o.hosts[rank].empty()) {
      return " (" + o.hosts[rank] + ")";
    }
    return "";
  }

  // Ends the process: the verdict on stderr in one write, no destructors, no atexit handlers
  // (the main thread may be inside a collective that will never return).
  [[noreturn]] void lost(const std::string& why) const {
    end_rank(o, o.exit_status,
             rt::rank_prefix() + why + "; stopping this rank (exit status " +
                 std::to_string(o.exit_status) + ") so the job can recover\n");
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

  // on_end has ended this rank without ending the process (the emulator's ranks are threads):
  // the other thread stops too.
  void ended() {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
    changed.notify_all();
  }

  bool leave_now() {
    std::lock_guard<std::mutex> lock(mutex);
    return leave_requested && !left;
  }

  // Store traffic: this rank's beat, and rank 0's watch over everyone's.
  void beat_loop() {
    if (o.rank == 0) peers.emplace(o.world_size, Clock::now());
    try {
      while (pause(interval, /*wake_to_leave=*/true)) {
        if (leave_now()) {
          say_goodbye();
          break;
        }
        store->add(beat_key(o.rank), 1);
        if (o.rank == 0) {
          const auto round = Clock::now();
          watch_beats();
          if (o.on_watch_round) {
            o.on_watch_round(
                std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - round));
          }
        } else {
          hang->publish(*store);
          if (store->check(kVerdictKey)) read_verdict(store->get(kVerdictKey));
        }
        last_ok.store(Clock::now().time_since_epoch().count());
      }
    } catch (const std::exception& e) {
      if (!leaving.load()) {
        try {
          lost("lost the store on rank 0" + host(0) + " at " + o.store_address + ": " +
               first_line(e.what()));
        } catch (const RankEnded&) {
          ended();
        }
      }
    } catch (const RankEnded&) {
      ended();
    }
    returned();
  }

  // Rank 0, each beat: a rank whose beat counter has not moved for the timeout (and has not left)
  // is lost; then the hang watch over everyone's progress. Either verdict is posted for the others,
  // who read it on their next beat, while this process, which serves the store, stays a moment.
  void watch_beats() {
    const auto now = Clock::now();
    peers->read(*store, now, [&](int r, std::chrono::milliseconds silent) {
      if (silent < o.timeout || store->check(left_key(r))) return;
      const std::string verdict =
          "lost rank " + std::to_string(r) + host(r) + ": no heartbeat for " + seconds_text(silent);
      store->set(kVerdictKey, verdict);
      std::this_thread::sleep_for(interval + interval / 2);
      lost(verdict);
    });
    const auto later = Clock::now();  // after the beats' round trip
    if (const auto verdict = hang->watch(*store, later, peers->ages(later))) {
      store->set(kVerdictKey, encode_hang_verdict(*verdict));
      hang->carry_out(*store, verdict->message, *verdict);
    }
  }

  void read_verdict(const std::string& v) {
    if (const auto hung = decode_hang_verdict(v)) {
      hang->carry_out(*store, "rank 0 reports: " + hung->message, *hung);
    }
    lost("rank 0 reports: " + v);
  }

  void say_goodbye() {
    hang->publish_finishing(*store);
    store->set(left_key(o.rank), "1");
    if (o.rank == 0) {
      // The store lives in this process: wait until every rank has left before it goes.
      const auto deadline = Clock::now() + o.timeout;
      for (int r = 1; r < o.world_size && Clock::now() < deadline; ++r) {
        while (!store->check(left_key(r)) && Clock::now() < deadline) {
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
    try {
      watch();
    } catch (const RankEnded&) {
      ended();
    }
    returned();
  }
  void watch() {
    while (pause(interval / 2, /*wake_to_leave=*/false)) {
      if (leaving.load() || hang->ending()) continue;
      const auto last = Clock::time_point(Clock::duration(last_ok.load()));
      const auto silent =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last);
      if (silent >= o.timeout) {
        lost("no answer from the store on rank 0" + host(0) + " at " + o.store_address + " for " +
             seconds_text(silent) + " (rank 0's node, or this node's link, is gone)");
      }
    }
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

Heartbeat::Heartbeat(std::unique_ptr<KvStore> store, HeartbeatOptions options)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.store = std::move(store);
  s.o = std::move(options);
  // Five beats per timeout, at most one a second.
  s.interval = std::min<std::chrono::milliseconds>(1000ms, s.o.timeout / 5);
  s.hang.emplace(static_cast<const HangOptions&>(s.o), s.o.rank, s.o.world_size, s.o.hosts,
                 s.interval);
  s.store->set_timeout(s.o.timeout);
  s.store->add(beat_key(s.o.rank), 1);
  if (s.o.rank != 0) s.hang->publish(*s.store);
  s.running = 2;
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
