#include "step/cluster.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <regex>
#include <sstream>

#include "common/process.hpp"
#include "slurm/client.hpp"

extern char** environ;

namespace hpctrain::step {

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\n") + 1);
  return s;
}

class CommandCluster : public Cluster {
 public:
  Nodes hostnames(const std::string& nodelist) override {
    const auto r = common::run_command({"scontrol", "show", "hostnames", nodelist}, seconds(30));
    if (r.exit_status != 0) return {};
    return lines_of(r.out);
  }

  std::optional<int> slurmd_port() override {
    const auto r = common::run_command({"scontrol", "show", "config"}, seconds(30));
    if (r.exit_status != 0) return std::nullopt;
    for (const auto& line : lines_of(r.out)) {
      std::istringstream words(line);
      std::string key, eq, value;
      words >> key >> eq >> value;
      if (key != "SlurmdPort") continue;
      if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos ||
          value.size() > 5) {
        return std::nullopt;
      }
      return std::stoi(value);
    }
    return std::nullopt;
  }

  int64_t partition_nodes(const std::string& partition) override {
    const auto r = common::run_command(
        {"sinfo", "--noheader", "--partition=" + partition, "--format=%D"}, seconds(10));
    int64_t total = 0;
    if (r.exit_status != 0) return 0;
    for (const auto& line : lines_of(r.out)) {
      const auto t = trim(line);
      if (!t.empty() && t.size() < 10 && t.find_first_not_of("0123456789") == std::string::npos) {
        total += std::stoll(t);
      }
    }
    return total;
  }

  std::vector<std::string> step_ids(const std::string& job) override {
    const auto r = common::run_command(
        {"squeue", "--noheader", "--steps", "--jobs=" + job, "--format=%i"}, seconds(10));
    static const std::regex kStep("[0-9_]+\\.[0-9]+");
    std::vector<std::string> out;
    for (const auto& line : lines_of(r.out)) {
      const auto id = trim(line);
      if (std::regex_match(id, kStep)) out.push_back(id);
    }
    return out;
  }

  void kill_step(const std::string& step_id) override {
    // Not waited for (its zombie is reaped when this process ends); timeout(1) bounds it.
    std::vector<std::string> argv = {"timeout", "30", "scancel", "--signal=KILL", step_id};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = 0;
    ::posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  }

  std::string job_state(const std::string& job) override {
    const auto r =
        common::run_command({"squeue", "--noheader", "--jobs=" + job, "--format=%T"}, seconds(10));
    const auto lines = lines_of(r.out);
    return r.exit_status == 0 && !lines.empty() ? trim(lines.front()) : std::string();
  }

  bool requeue(const std::string& job, std::string* said) override {
    const auto r = common::run_command({"scontrol", "requeue", job}, seconds(60));
    if (said) *said = trim(r.err.empty() ? r.out : r.err);
    return r.exit_status == 0;
  }

  bool exclude(const std::string& job, const std::string& list) override {
    const auto r = common::run_command(
        {"scontrol", "update", "JobId=" + job, "ExcNodeList=" + list}, seconds(10));
    return r.exit_status == 0;
  }

  std::optional<std::string> submit_next(const std::string& job,
                                         const std::filesystem::path& script, int64_t restart,
                                         const std::string& exclude, std::string* said) override {
    std::vector<std::string> argv = {
        "sbatch", "--parsable", "--dependency=afterany:" + job,
        "--export=ALL,HPCTRAIN_CHAIN_RESTART=" + std::to_string(restart)};
    if (!exclude.empty()) argv.push_back("--exclude=" + exclude);
    argv.push_back(script.string());
    const auto r = common::run_command(argv, seconds(60));
    if (said) *said = trim(r.err.empty() ? r.out : r.err);
    if (r.exit_status != 0) return std::nullopt;
    auto id = slurm::parse_job_id(r.out);
    if (!id && said) *said = "sbatch printed no job id: '" + trim(r.out) + "'";
    return id;
  }

  std::vector<std::pair<std::string, std::string>> probe(const Nodes& nodes, int port,
                                                         milliseconds timeout) override {
    const auto outcome = probe_tcp(nodes, port, timeout);
    std::vector<std::pair<std::string, std::string>> out;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!outcome[i].empty()) out.emplace_back(nodes[i], outcome[i]);
    }
    return out;
  }
};

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

}  // namespace

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

std::unique_ptr<Cluster> make_command_cluster() { return std::make_unique<CommandCluster>(); }

}  // namespace hpctrain::step
