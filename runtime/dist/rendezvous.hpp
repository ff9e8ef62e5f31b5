// How the ranks find each other, decided from the environment without joining anything: PMIx, a
// TCP store at a host and port every rank can compute, or one local process. Torch-free, so the
// decision is unit-tested without libtorch. Thread safety: pure apart from name resolution.
#pragma once

#include <string>

#include "dist/world.hpp"

namespace hpctrain::dist {

struct RendezvousPlan {
  std::string method;        // "pmix", "tcp" (host:port known to all), "local" (one process)
  std::string host;          // tcp: the store's host
  int port = 0;              // tcp: the store's port (0 for pmix: chosen by rank 0's kernel)
  std::string port_source;   // "MASTER_PORT", "derived from job 12 step 0", "kernel"
  std::string host_source;   // tcp: "MASTER_ADDR" or "first node of the step"
  bool agent_store = false;  // torchrun's agent hosts the store; rank 0 is a client too
};

// In order: one rank -> local; MASTER_ADDR and MASTER_PORT -> that address; PMIx -> pmix; a Slurm
// step -> rank 0's node, which is MASTER_ADDR when set (rank 0 must run there) or else the step's
// first node, at MASTER_PORT or a port derived from the job and step ids. Throws rt::Error when
// none applies or the host does not resolve.
RendezvousPlan plan_rendezvous(const WorldInfo& world, const EnvMap& env);

}  // namespace hpctrain::dist
