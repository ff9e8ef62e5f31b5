// Joining the job's process group: the rendezvous (PMIx, or a TCPStore at a known host and port),
// the store every rank registers in, and the communicator on top (Gloo on CPU, NCCL on CUDA).
// A rank that never arrives makes the others fail with a message naming it.
// Thread safety: join() from the main thread; the Group's communicator as communicator.hpp says.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/heartbeat.hpp"
#include "dist/rendezvous.hpp"
#include "dist/world.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::dist {

struct JoinOptions {
  std::chrono::seconds rendezvous_timeout{600};
  std::chrono::seconds collective_timeout{600};
  std::string backend = "gloo";  // gloo | nccl
  int cuda_device = -1;          // for nccl
  // Which job this is (StoreJoinOptions::job): a rank refuses a rendezvous store that serves
  // another. Empty: not checked.
  std::string job;
};
// [train] rendezvous_timeout_s and collective_timeout_s; the backend and device are the worker's
// choice (gloo on CPU, nccl on a GPU).
JoinOptions join_options_from_spec(const spec::Spec& spec);

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual Communicator& communicator() = 0;
  // Host of every rank, as each registered it.
  virtual const std::vector<std::string>& hosts() const = 0;
  virtual const RendezvousPlan& plan() const = 0;
  // "host:port" of the store.
  virtual std::string store_address() const = 0;

  // Starts this rank's heartbeat and hang watchdog (dist/heartbeat.hpp) on a store connection of
  // its own: when a peer, or the store, is silent for `options.timeout`, the process ends with
  // `options.exit_status`; a hang, with `options.hang_exit_status`. The group fills in the rank,
  // world size, hosts and store address.
  virtual void start_heartbeat(HeartbeatOptions options) = 0;
  // An orderly end (finished, or checkpointed to be requeued): the heartbeat stops without
  // alarming the others. No-op without a heartbeat.
  virtual void leave() = 0;
};

std::unique_ptr<ProcessGroup> join(const WorldInfo& world, const EnvMap& env,
                                   const JoinOptions& options);

}  // namespace hpctrain::dist
