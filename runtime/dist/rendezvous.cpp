#include "dist/rendezvous.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include "common/error.hpp"
#include "dist/ports.hpp"

namespace hpctrain::dist {
namespace {

std::string host_short_name(const std::string& host) { return host.substr(0, host.find('.')); }

bool host_resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  const bool ok = ::getaddrinfo(host.c_str(), nullptr, &hints, &result) == 0 && result;
  if (result) ::freeaddrinfo(result);
  return ok;
}

}  // namespace

RendezvousPlan plan_rendezvous(const WorldInfo& world, const EnvMap& env) {
  RendezvousPlan plan;
  if (world.world_size == 1) {
    plan.method = "local";
    plan.host = "127.0.0.1";
    plan.port = 0;
    plan.port_source = "kernel";
    return plan;
  }
  auto agent = env.find("TORCHELASTIC_USE_AGENT_STORE");
  plan.agent_store = agent != env.end() && agent->second == "True";
  if (world.master_addr && world.master_port) {
    plan.method = "tcp";
    plan.host = *world.master_addr;
    plan.port = *world.master_port;
    plan.host_source = "MASTER_ADDR";
    plan.port_source = "MASTER_PORT";
    return plan;
  }
  if (world.pmix) {
    plan.method = "pmix";
    plan.port = 0;
    plan.port_source = "kernel-chosen port published through PMIx";
    return plan;
  }
  if (world.source == EnvSource::kSlurm && !world.nodes.empty()) {
    plan.method = "tcp";
    // MASTER_ADDR alone names rank 0's host; the port is still MASTER_PORT or the derived one.
    plan.host = world.master_addr.value_or(world.nodes.front());
    plan.host_source = world.master_addr ? "MASTER_ADDR" : "first node of the step";
    if (world.master_port) {
      plan.port = *world.master_port;
      plan.port_source = "MASTER_PORT";
    } else {
      plan.port = derive_port(world.job_id, world.step_id, ephemeral_port_range());
      plan.port_source = "derived from job " + world.job_id + " step " + world.step_id;
    }
    if (world.master_addr) {
      if (!host_resolves(plan.host)) {
        HPCTRAIN_THROW(rt::Error, "MASTER_ADDR '" + plan.host +
                                      "' does not resolve to an address; set it to the host of "
                                      "rank 0, or unset it to use the step's first node");
      }
      // rank 0 listens on its own host; MASTER_ADDR may be an address rather than a name, so it
      // cannot be compared with the hostname: the rendezvous timeout catches a wrong one.
      return plan;
    }
    if (!host_resolves(plan.host)) {
      HPCTRAIN_THROW(rt::Error, "the step's first node '" + plan.host +
                                    "' (where rank 0 listens) does not resolve to an address; "
                                    "use srun --mpi=pmix, or set MASTER_ADDR to rank 0's host "
                                    "(the port is derived, or MASTER_PORT)");
    }
    if (world.rank == 0 && host_short_name(world.hostname) != host_short_name(plan.host)) {
      HPCTRAIN_THROW(rt::Error, "rank 0 runs on " + world.hostname +
                                    " but the step's first node is " + plan.host +
                                    "; use srun --mpi=pmix, or set MASTER_ADDR to rank 0's host "
                                    "(the port is derived, or MASTER_PORT)");
    }
    return plan;
  }
  HPCTRAIN_THROW(rt::Error, std::string("no way to rendezvous for ") + to_string(world.source) +
                                " ranks: set MASTER_ADDR and MASTER_PORT, or launch with PMIx");
}

}  // namespace hpctrain::dist
