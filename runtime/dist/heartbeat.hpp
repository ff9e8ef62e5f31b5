// The heartbeat that lets ranks notice a lost peer in seconds instead of at the collective
// timeout (docs/resilience.md). Every rank adds to its own counter in the store once a second
// over a store connection of its own (Store::clone(): a thread blocked on a dead peer's key must
// not stall the rest); rank 0 watches every counter, and when one stops moving for `timeout` it
// posts a verdict that the others read on their next beat. A rank that cannot reach the store
// (rank 0's node is gone, or its own link is) notices that its beats stopped succeeding. Either
// way the rank prints the verdict and ends its process with `exit_status`: a rank blocked in a
// Gloo collective cannot be interrupted otherwise, and the sbatch script, not this rank, decides
// what happens next.
//
// The hang watchdog rides on the same beats: each rank publishes where its training stands
// (dist/progress.hpp: step, phase, a counter that moves on every phase change). When some
// rank's counter has not moved for the hang timeout, rank 0 names the ranks the others wait for
// (those whose beats stopped too, as "silent"; else the furthest behind: lowest step, then
// earliest phase), with their host, phase, step and seconds, and what the others are in; every
// rank ends with `hang_exit_status`, the named ones after printing their threads' stacks (gdb,
// where present), the others once those are out (srun would end the named ranks with them
// otherwise); nobody waits for the stacks of a silent rank, which cannot print them.
// Thread safety: construct and leave() from one thread; two threads of its own run meanwhile.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "dist/progress.hpp"

namespace c10d {
class Store;
}

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::dist {

struct HeartbeatOptions {
  int rank = 0;
  int world_size = 1;
  std::vector<std::string> hosts;  // host of every rank, for the messages
  std::string store_address;       // "host:port", for the messages
  std::chrono::milliseconds timeout{10000};
  int exit_status = 1;
  // A rank whose progress has not moved this long is hung; 0: automatic, 10 times the median
  // step time of rank 0, at least `hang_floor`. Start-up, the first step of the process and
  // finishing are not watched; a checkpoint has `checkpoint_timeout` at least.
  std::chrono::milliseconds hang_timeout{0};
  std::chrono::milliseconds hang_floor{60000};
  std::chrono::milliseconds checkpoint_timeout{600000};
  int hang_exit_status = 1;
  bool dump_stacks = true;  // the ranks named print their threads' stacks before exiting
  // Rank 0, before it posts a hang verdict: the ranks named and the message (the worker records
  // them for the batch script, which treats the named ranks' nodes as lost). Runs on the
  // heartbeat's thread; an exception is reported and otherwise ignored.
  std::function<void(const std::vector<int>& named, const std::string& message)> on_hang;
};

// resilience.heartbeat_timeout_s and hang_timeout_s, checkpoint.commit_timeout_s; the exit
// statuses kExitPeerLost and kExitHang (common/exit_codes.hpp). The rank, hosts, store address and
// on_hang are the caller's.
HeartbeatOptions heartbeat_options_from_spec(const spec::Spec& spec);

// The hang timeout in force: hang_timeout when set, else 10 times the median of `step_seconds`
// (rank 0's seconds per step so far), at least hang_floor (the floor alone before any step).
std::chrono::milliseconds hang_limit(const HeartbeatOptions& o,
                                     const std::vector<double>& step_seconds);

// How long a rank where `s` says may make no progress before it is hung: `limit` (hang_limit()),
// in a checkpoint the larger of it and checkpoint_timeout (a save slower than the hang timeout but
// within the commit timeout is no hang); nullopt where nothing is watched (start-up, the first
// step of the process, finishing).
std::optional<std::chrono::milliseconds> hang_allowance(const progress::Snapshot& s,
                                                        std::chrono::milliseconds limit,
                                                        const HeartbeatOptions& o);

// What rank 0 knows of one rank when it forms a hang verdict.
struct RankView {
  std::optional<progress::Snapshot> where;  // its last published progress (nullopt: none)
  std::chrono::milliseconds still{0};       // since its progress counter last moved
  std::chrono::milliseconds beat_age{0};    // since its beat counter last moved
  std::string host;                         // "" when unknown
};

struct HangVerdict {
  std::vector<int> named;   // the ranks the others wait for, ascending
  std::vector<int> silent;  // those of `named` whose heartbeat is silent too: no stacks to wait for
  std::string message;      // "hang: no progress for ..."
};

// A rank's beat as rank 0 sees it: on time (less than 1.5 beat intervals old: a rank alive, even
// one stuck in its training, beats every interval), late (up to 3 intervals: perhaps a slow beat,
// perhaps the last one) or silent (3 intervals or more: a stopped process, or one whose link is
// gone, well before the heartbeat timeout, 5 intervals at least, ends the job for it).
enum class Beat { kOnTime, kLate, kSilent };
Beat beat_state(std::chrono::milliseconds age, std::chrono::milliseconds beat_interval);

// The hang verdict, once some rank's progress has stood still for `longest` against `limit`
// (hang_limit()); nullopt while some rank's beat is late: rank 0 asks again at its next beat,
// when that rank has either beaten or fallen silent (2 intervals at most); a rank finishing,
// which stops beating as it leaves, is neither. The silent ranks are named, "silent" with the
// last progress they published: a process that does not answer at all is what the others wait
// for, and its published progress is only its last word. With none silent, the ranks furthest
// behind are named (the lowest step, then the earliest phase of it) with their phase and step.
// Either way the message ends with what the others are in.
std::optional<HangVerdict> hang_verdict(const std::vector<RankView>& ranks,
                                        std::chrono::milliseconds limit,
                                        std::chrono::milliseconds longest,
                                        std::chrono::milliseconds beat_interval);

class Heartbeat {
 public:
  // `store` must be a connection of the heartbeat's own (a clone); the keys go under "hb/".
  Heartbeat(c10::intrusive_ptr<c10d::Store> store, HeartbeatOptions options);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // This rank is ending in order (finished, or checkpointed to be requeued): it stops beating
  // and watching. Rank 0, whose process serves the store, first waits (up to the timeout) until
  // every rank has left, so none of them mistakes its exit for a lost store.
  void leave();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace hpctrain::dist
