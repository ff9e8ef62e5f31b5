// Whether the step's nodes are still there: a TCP connection to each node's slurmd, all at once,
// with a deadline. It asks the nodes themselves, not Slurm's controller (which may take minutes to
// notice a node gone), so it is no Slurm command and lives here, beside its only user, the step
// supervisor; the port comes from the Slurm layer (SlurmClient::slurmd_port).
// Thread safety: reentrant.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/records.hpp"
#include "supervisor/decide.hpp"

namespace hpctrain::supervisor {

// (node, cause) for each node whose slurmd did not answer: kSilent when nothing answered within
// the deadline (cut off, powered off), kRefused when the connection was refused or the name does
// not resolve (its processes were killed): the ledger's causes of a node loss.
using Unanswered = std::vector<std::pair<std::string, records::LossCause>>;

// What the supervisor probes with: probe_slurmds, or a test's stand-in.
using NodeProbe =
    std::function<Unanswered(const Nodes& nodes, int port, std::chrono::milliseconds timeout)>;

// TCP connections to `port` of every node at once, for at most `timeout`: the nodes that did not
// take one, in order.
Unanswered probe_slurmds(const Nodes& nodes, int port, std::chrono::milliseconds timeout);

}  // namespace hpctrain::supervisor
