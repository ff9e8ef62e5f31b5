// The rendezvous port when PMIx is not there: derived deterministically from the job and step ids
// so every rank computes the same one, outside the kernel's ephemeral range so an outgoing
// connection cannot already hold it. Probed by binding.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace hpctrain::dist {

// The kernel's ephemeral port range, from /proc/sys/net/ipv4/ip_local_port_range (or `path`).
std::pair<int, int> ephemeral_port_range(
    const std::string& path = "/proc/sys/net/ipv4/ip_local_port_range");

// A port in [10000, 65535] outside [ephemeral.first, ephemeral.second], a stable hash of
// (job_id, step_id). Throws rt::Error if no such port exists.
int derive_port(const std::string& job_id, const std::string& step_id,
                std::pair<int, int> ephemeral);

// Binds a listening TCP socket on all IPv4 addresses at `port` (0: the kernel picks); returns the
// socket fd and the bound port. Throws rt::Error naming the port (and that it is taken).
std::pair<int, int> bind_listen_socket(int port);

}  // namespace hpctrain::dist
