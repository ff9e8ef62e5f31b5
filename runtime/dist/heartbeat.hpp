// The heartbeat that lets ranks notice a lost peer in seconds instead of at the collective
// timeout (docs/resilience.md): liveness. Every rank adds to its own counter in the store once a
// second over a store connection of its own (Store::clone(): a thread blocked on a dead peer's key
// must not stall the rest); rank 0 watches every counter, and when one stops moving for `timeout`
// it posts a verdict that the others read on their next beat. A rank that cannot reach the store
// (rank 0's node is gone, or its own link is) notices that its beats stopped succeeding. Either
// way the rank prints the verdict and ends its process with `exit_status`: a rank blocked in a
// Gloo collective cannot be interrupted otherwise, and the step supervisor (`hpctrain
// supervise`), not this rank, decides what happens next.
//
// The hang watchdog (dist/hang_watchdog.hpp) rides on the same beats and store connection: each
// beat publishes where this rank's training stands, rank 0 reads everyone's and posts a hang
// verdict through the same key; every rank then ends with `hang_exit_status`, the named ones after
// printing their threads' stacks (dist/stack_dump.hpp). Its decisions are dist/hang_verdict.hpp's.
// Thread safety: construct and leave() from one thread; two threads of its own run meanwhile.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/hang_verdict.hpp"
#include "dist/kv_store.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::dist {

// The liveness settings, and the hang watchdog's (HangOptions) it carries to it.
struct HeartbeatOptions : HangOptions {
  int rank = 0;
  int world_size = 1;
  std::vector<std::string> hosts;  // host of every rank, for the messages
  std::string store_address;       // "host:port", for the messages
  std::chrono::milliseconds timeout{10000};
  int exit_status = 1;
  // Rank 0, after each watch round (the beats' and the hang watch's reads): how long it took.
  // Runs on the heartbeat's thread (the many-rank emulator times the rounds with it).
  std::function<void(std::chrono::microseconds)> on_watch_round;
};

// resilience.heartbeat_timeout_s and hang_timeout_s, checkpoint.commit_timeout_s; the exit
// statuses kExitPeerLost and kExitHang (common/exit_codes.hpp). The rank, hosts, store address and
// on_hang are the caller's.
HeartbeatOptions heartbeat_options_from_spec(const spec::Spec& spec);

class Heartbeat {
 public:
  // `store` must be a connection of the heartbeat's own (a clone); the keys go under "hb/".
  Heartbeat(std::unique_ptr<KvStore> store, HeartbeatOptions options);
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
