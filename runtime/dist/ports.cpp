#include "dist/ports.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "common/error.hpp"
#include "common/unique_fd.hpp"

namespace hpctrain::dist {
namespace {

constexpr int kLowestPort = 10000;  // below this live well-known services and Slurm's defaults
constexpr int kHighestPort = 65535;
constexpr int kListenBacklog = 512;  // every rank may connect at once

// FNV-1a, 64 bits: stable across compilers and platforms, unlike std::hash.
uint64_t fnv1a64(const std::string& text) {
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

}  // namespace

std::pair<int, int> ephemeral_port_range(const std::string& path) {
  std::ifstream in(path);
  if (!in) HPCTRAIN_THROW(rt::Error, "cannot read the ephemeral port range from " + path);
  long lo = 0;
  long hi = 0;
  std::string extra;
  if (!(in >> lo >> hi) || (in >> extra)) {
    HPCTRAIN_THROW(rt::Error, path + ": expected two integers (the ephemeral port range)");
  }
  if (lo < 1 || hi > kHighestPort || lo > hi) {
    HPCTRAIN_THROW(rt::Error, path + ": invalid ephemeral port range " + std::to_string(lo) + " " +
                                  std::to_string(hi));
  }
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

int derive_port(const std::string& job_id, const std::string& step_id,
                std::pair<int, int> ephemeral) {
  const auto [lo, hi] = ephemeral;
  if (lo > hi) {
    HPCTRAIN_THROW(rt::Error, "ephemeral port range " + std::to_string(lo) + "-" +
                                  std::to_string(hi) + " is reversed");
  }
  // The excluded interval, clipped to the allowed one (it may lie partly or wholly outside).
  const int cut_lo = std::max(lo, kLowestPort);
  const int cut_hi = std::min(hi, kHighestPort);
  const int excluded = cut_lo <= cut_hi ? cut_hi - cut_lo + 1 : 0;
  const int allowed = (kHighestPort - kLowestPort + 1) - excluded;
  if (allowed <= 0) {
    HPCTRAIN_THROW(rt::Error, "no port in [" + std::to_string(kLowestPort) + ", " +
                                  std::to_string(kHighestPort) +
                                  "] lies outside the ephemeral range " + std::to_string(lo) + "-" +
                                  std::to_string(hi));
  }
  // Modulo bias is below 2^-47 for a 64-bit hash and at most 55536 ports.
  int port = kLowestPort +
             static_cast<int>(fnv1a64(job_id + "/" + step_id) % static_cast<uint64_t>(allowed));
  if (excluded > 0 && port >= cut_lo) port += excluded;
  return port;
}

std::pair<int, int> bind_listen_socket(int port) {
  if (port < 0 || port > kHighestPort) {
    HPCTRAIN_THROW(rt::Error, "port " + std::to_string(port) + " is out of range");
  }
  const std::string where = "port " + std::to_string(port);
  UniqueFd fd(  // closed unless released: every error path below throws
      ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) HPCTRAIN_THROW(rt::Error, "socket for " + where + ": " + std::strerror(errno));
  // A restarted job must be able to reuse its derived port while old connections sit in TIME_WAIT.
  const int on = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0) {
    HPCTRAIN_THROW(rt::Error, "SO_REUSEADDR on " + where + ": " + std::strerror(errno));
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  // The sockets API takes the generic sockaddr; this is its documented use.
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    if (error == EADDRINUSE) {
      HPCTRAIN_THROW(rt::Error,
                     where + " is taken (another process listens on it): " + std::strerror(error));
    }
    HPCTRAIN_THROW(rt::Error, "bind to " + where + ": " + std::strerror(error));
  }
  if (::listen(fd.get(), kListenBacklog) != 0) {
    HPCTRAIN_THROW(rt::Error, "listen on " + where + ": " + std::strerror(errno));
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    HPCTRAIN_THROW(rt::Error, "getsockname on " + where + ": " + std::strerror(errno));
  }
  return {fd.release(), ntohs(bound.sin_port)};
}

}  // namespace hpctrain::dist
