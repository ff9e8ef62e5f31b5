// The heartbeat that lets ranks notice a lost peer in seconds instead of at the collective
// timeout (docs/resilience.md): liveness, aggregated by node (docs/scaling.md, "beats"). The ranks
// of a node (those sharing a host) beat on their node's board in shared memory
// (dist/node_board.hpp) once a second; the node's leader, its lowest rank, reads the board and
// posts one record for the whole node in rank 0's store over a store connection of its own
// (Store::clone(): a thread blocked on a dead peer's key must not stall the rest): every rank's
// beat age, whether it left, and where its training stands. Rank 0 reads every node's record in
// one round trip, and when a rank (or a whole node, its leader silent) has not beaten for
// `timeout` it posts a verdict that the leaders read on their next beat and pass on through their
// boards. So rank 0's store sees two operations a second per node, not three per rank. A leader
// that cannot reach the store notices that its beats stopped succeeding; a member notices that
// its leader stopped beating. Either way the rank prints the verdict and ends its process with
// `exit_status`: a rank blocked in a Gloo collective cannot be interrupted otherwise, and the step
// supervisor (`hpctrain supervise`), not this rank, decides what happens next. Without a board
// token (or hosts), every rank is a node of its own.
//
// The hang watchdog (dist/hang_watchdog.hpp) rides on the same beats: the records carry every
// rank's progress, rank 0 judges it and posts a hang verdict through the same key; every rank then
// ends with `hang_exit_status`, the named ones after printing their threads' stacks
// (dist/stack_dump.hpp), each over its own store connection. Its decisions are
// dist/hang_verdict.hpp's.
// Thread safety: construct and leave() from one thread; one thread of its own runs meanwhile (a
// member's), or two (a leader's).
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
  // Every rank's host, for the messages and the nodes (shared: at 10,000 ranks a copy per rank
  // and per part is megabytes); null or "": unknown.
  std::shared_ptr<const std::vector<std::string>> hosts;
  std::string store_address;  // "host:port", for the messages
  // The join's token (dist/store_join.hpp), which names the nodes' boards; empty: no boards, every
  // rank a node of its own.
  std::string board_token;
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

// The nodes the heartbeat groups the ranks into: ranks sharing a host, ascending, the nodes in
// order of their first rank; with `grouped` false (or a rank's host unknown) a rank alone.
std::vector<std::vector<int>> heartbeat_nodes(const std::vector<std::string>& hosts, int world_size,
                                              bool grouped);

class Heartbeat {
 public:
  // `store` must be a connection of the heartbeat's own (a clone); the keys go under "hb/".
  // Throws rt::Error when the node's board cannot be opened.
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
