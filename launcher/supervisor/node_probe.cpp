#include "supervisor/node_probe.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

namespace hpctrain::supervisor {

namespace {

using std::chrono::milliseconds;

// A non-blocking connection to host:port under way: its socket, or -1 with `done` set.
struct Connection {
  int fd = -1;
  std::string done;  // "" while pending or answered; "refused" when it failed
  bool answered = false;
};

Connection start_connect(const std::string& host, int port) {
  Connection a;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    a.done = "refused";
    return a;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owner(found, ::freeaddrinfo);
  a.fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  found->ai_protocol);
  if (a.fd < 0) {
    a.done = "refused";
  } else if (::connect(a.fd, found->ai_addr, found->ai_addrlen) == 0) {
    a.answered = true;
  } else if (errno != EINPROGRESS) {
    a.done = "refused";
  }
  return a;
}

// "" (answered), "silent" or "refused" for each of `hosts`, in order.
std::vector<std::string> probe_tcp(const Nodes& hosts, int port, milliseconds timeout) {
  std::vector<Connection> attempts;
  for (const auto& h : hosts) attempts.push_back(start_connect(h, port));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < attempts.size(); ++i) {
      if (attempts[i].fd >= 0 && !attempts[i].answered && attempts[i].done.empty()) {
        fds.push_back({attempts[i].fd, POLLOUT, 0});
        which.push_back(i);
      }
    }
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (fds.empty() || left.count() <= 0) break;
    if (::poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!fds[k].revents) continue;
      int error = 0;
      socklen_t len = sizeof error;
      ::getsockopt(fds[k].fd, SOL_SOCKET, SO_ERROR, &error, &len);
      auto& a = attempts[which[k]];
      if (error == 0) {
        a.answered = true;
      } else {
        a.done = "refused";
      }
    }
  }
  std::vector<std::string> out;
  for (auto& a : attempts) {
    if (a.fd >= 0) ::close(a.fd);
    out.push_back(a.answered ? "" : a.done.empty() ? "silent" : a.done);
  }
  return out;
}

}  // namespace

Unanswered probe_slurmds(const Nodes& nodes, int port, milliseconds timeout) {
  const auto outcome = probe_tcp(nodes, port, timeout);
  Unanswered out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (outcome[i].empty()) continue;
    out.emplace_back(nodes[i], outcome[i] == "silent" ? records::LossCause::kSilent
                                                      : records::LossCause::kRefused);
  }
  return out;
}

}  // namespace hpctrain::supervisor
