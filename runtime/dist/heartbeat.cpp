#include "dist/heartbeat.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/error.hpp"

namespace hpctrain::dist {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string beat_key(int rank) { return "hb/beat/" + std::to_string(rank); }
std::string left_key(int rank) { return "hb/left/" + std::to_string(rank); }
const std::string kVerdictKey = "hb/verdict";

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
  std::atomic<Clock::rep> last_ok{Clock::now().time_since_epoch().count()};

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
    std::vector<int64_t> seen(o.world_size, -1);
    std::vector<Clock::time_point> moved(o.world_size, Clock::now());
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
          watch_counters(seen, moved);
        } else if (store->check({kVerdictKey})) {
          const auto v = store->get(kVerdictKey);
          lost("rank 0 reports: " + std::string(v.begin(), v.end()));
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

  void watch_counters(std::vector<int64_t>& seen, std::vector<Clock::time_point>& moved) {
    const auto now = Clock::now();
    for (int r = 1; r < o.world_size; ++r) {
      const int64_t value = store->add(beat_key(r), 0);
      if (value != seen[r]) {
        seen[r] = value;
        moved[r] = now;
        continue;
      }
      const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - moved[r]);
      if (silent < o.timeout || store->check({left_key(r)})) continue;
      const std::string verdict =
          "lost rank " + std::to_string(r) + host(r) + ": no heartbeat for " + seconds_text(silent);
      store->set(kVerdictKey, verdict);
      // The others read the verdict on their next beat; this process serves the store.
      std::this_thread::sleep_for(interval + interval / 2);
      lost(verdict);
    }
  }

  void say_goodbye() {
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
      if (leaving.load()) continue;
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

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> store, HeartbeatOptions options)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->o = std::move(options);
  // Five beats per timeout, at most one a second.
  state_->interval = std::min<std::chrono::milliseconds>(1000ms, state_->o.timeout / 5);
  state_->store->setTimeout(state_->o.timeout);
  state_->store->add(beat_key(state_->o.rank), 1);
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
