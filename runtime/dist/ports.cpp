#include "dist/ports.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

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

// Closes the socket unless released: every error path below throws.
class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

std::pair<int, int> ephemeral_port_range(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the ephemeral port range from " + path);
  long lo = 0;
  long hi = 0;
  std::string extra;
  if (!(in >> lo >> hi) || (in >> extra)) {
    throw std::runtime_error(path + ": expected two integers (the ephemeral port range)");
  }
  if (lo < 1 || hi > kHighestPort || lo > hi) {
    throw std::runtime_error(path + ": invalid ephemeral port range " + std::to_string(lo) + " " +
                             std::to_string(hi));
  }
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

int derive_port(const std::string& job_id, const std::string& step_id,
                std::pair<int, int> ephemeral) {
  const auto [lo, hi] = ephemeral;
  if (lo > hi) {
    throw std::invalid_argument("ephemeral port range " + std::to_string(lo) + "-" +
                                std::to_string(hi) + " is reversed");
  }
  // The excluded interval, clipped to the allowed one (it may lie partly or wholly outside).
  const int cut_lo = std::max(lo, kLowestPort);
  const int cut_hi = std::min(hi, kHighestPort);
  const int excluded = cut_lo <= cut_hi ? cut_hi - cut_lo + 1 : 0;
  const int allowed = (kHighestPort - kLowestPort + 1) - excluded;
  if (allowed <= 0) {
    throw std::invalid_argument(
        "no port in [" + std::to_string(kLowestPort) + ", " + std::to_string(kHighestPort) +
        "] lies outside the ephemeral range " + std::to_string(lo) + "-" + std::to_string(hi));
  }
  // Modulo bias is below 2^-47 for a 64-bit hash and at most 55536 ports.
  int port = kLowestPort +
             static_cast<int>(fnv1a64(job_id + "/" + step_id) % static_cast<uint64_t>(allowed));
  if (excluded > 0 && port >= cut_lo) port += excluded;
  return port;
}

std::pair<int, int> bind_listen_socket(int port) {
  if (port < 0 || port > kHighestPort) {
    throw std::invalid_argument("port " + std::to_string(port) + " is out of range");
  }
  const std::string where = "port " + std::to_string(port);
  FdGuard fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) throw std::system_error(errno, std::generic_category(), "socket for " + where);
  // A restarted job must be able to reuse its derived port while old connections sit in TIME_WAIT.
  const int on = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0) {
    throw std::system_error(errno, std::generic_category(), "SO_REUSEADDR on " + where);
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  // The sockets API takes the generic sockaddr; this is its documented use.
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    if (error == EADDRINUSE) {
      throw std::system_error(error, std::generic_category(),
                              where + " is taken (another process listens on it)");
    }
    throw std::system_error(error, std::generic_category(), "bind to " + where);
  }
  if (::listen(fd.get(), kListenBacklog) != 0) {
    throw std::system_error(errno, std::generic_category(), "listen on " + where);
  }
  sockaddr_in bound{};
  socklen_t length = sizeof(bound);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    throw std::system_error(errno, std::generic_category(), "getsockname on " + where);
  }
  return {fd.release(), ntohs(bound.sin_port)};
}

}  // namespace hpctrain::dist
