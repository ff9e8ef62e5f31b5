// Many ranks in one process (docs/scaling.md, bench/scale/README.md "The emulator"): each
// emulated rank is a thread running hpctrain's own code for what it does at scale, against a real
// c10d TCPStore (libuv) served by a child process, as rank 0's process serves it: the store
// connection and the join (dist/store_join.hpp), the host list, the heartbeat with rank 0's watch
// and the verdicts (dist/heartbeat.hpp, dist/hang_watchdog.hpp), and the checkpoint's two-phase
// commit (checkpoint/store.hpp) against a real directory. No libtorch per rank, no gradients, no
// compute. Prints one table and one JSON line:
//   start-up to joined (p50 and the last rank), the store's operations during it;
//   steady state: the store's operations per second (round trips; keys read by multi_get beside)
//     and the store process's CPU, rank 0's watch round (p50, max);
//   a planted silent rank: from its last beat to every other rank's verdict, the verdict's text,
//     the watch round meanwhile;
//   a checkpoint: every rank's part (a thread pool writes them), then rank 0's commit, timed, with
//     the files in the step's directory; and the same with --ckpt-baseline ranks for comparison;
//   peak memory of this process and of the store's.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "checkpoint/store.hpp"
#include "common/time.hpp"
#include "dist/c10d_kv_store.hpp"
#include "dist/heartbeat.hpp"
#include "dist/store_join.hpp"
#include "dist/world.hpp"

namespace {

using namespace std::chrono_literals;
using hpctrain::Clock;
namespace dist = hpctrain::dist;
namespace fs = std::filesystem;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Round trips and keys read through every emulated rank's store connections.
std::atomic<int64_t> g_ops{0}, g_keys{0};

class CountingStore final : public dist::KvStore {
 public:
  explicit CountingStore(std::unique_ptr<dist::KvStore> inner) : inner_(std::move(inner)) {}
  int64_t add(const std::string& k, int64_t d) override {
    ++g_ops;
    return inner_->add(k, d);
  }
  void set(const std::string& k, const std::string& v) override {
    ++g_ops;
    inner_->set(k, v);
  }
  std::string get(const std::string& k) override {
    ++g_ops;
    return inner_->get(k);
  }
  bool check(const std::string& k) override {
    ++g_ops;
    return inner_->check(k);
  }
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    ++g_ops;
    g_keys += static_cast<int64_t>(keys.size());
    return inner_->multi_get(keys);
  }
  void set_timeout(std::chrono::milliseconds t) override { inner_->set_timeout(t); }

 private:
  std::unique_ptr<dist::KvStore> inner_;
};

// The store process: rank 0's TCPStore server, alone in its process so that its CPU is its own.
struct StoreProcess {
  pid_t pid = -1;
  int port = 0;
  int release_fd = -1;  // closed: the server exits

  // user + system seconds so far; peak resident MiB.
  double cpu_seconds() const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), {});
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string f;
    long utime = 0, stime = 0;
    for (int i = 3; fields >> f; ++i) {
      if (i == 14) utime = std::stol(f);
      if (i == 15) {
        stime = std::stol(f);
        break;
      }
    }
    return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  double peak_mib() const {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    }
    return 0;
  }
};

StoreProcess start_store() {
  int port_pipe[2], release[2];
  if (::pipe(port_pipe) != 0 || ::pipe(release) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(port_pipe[0]);
    ::close(release[1]);
    c10d::TCPStoreOptions o;
    o.port = 0;
    o.isServer = true;
    o.waitWorkers = false;
    o.numWorkers = std::nullopt;
    o.timeout = std::chrono::milliseconds(600000);
    auto server = c10::make_intrusive<c10d::TCPStore>("0.0.0.0", o);
    const int port = server->getPort();
    if (::write(port_pipe[1], &port, sizeof port) != sizeof port) ::_exit(3);
    char c;
    while (::read(release[0], &c, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(port_pipe[1]);
  ::close(release[0]);
  StoreProcess s;
  s.pid = pid;
  s.release_fd = release[1];
  if (::read(port_pipe[0], &s.port, sizeof s.port) != sizeof s.port) {
    throw std::runtime_error("the store process did not start");
  }
  ::close(port_pipe[0]);
  return s;
}

std::string host_of(int rank, int per_node) {
  std::ostringstream name;
  name << "node" << std::setw(5) << std::setfill('0') << rank / per_node;
  return name.str();
}

// The emulated training: every rank's progress moves together (a ticker), except a frozen one's,
// whose heartbeat thread blocks for good where it asks (a stopped process).
std::atomic<uint64_t> g_counter{1};
std::atomic<int64_t> g_step{1};
std::atomic<int> g_frozen{-1};

hpctrain::progress::Snapshot progress_of(int rank) {
  while (g_frozen.load() == rank) std::this_thread::sleep_for(1h);
  hpctrain::progress::Snapshot s;
  s.step = g_step.load();
  s.phase = hpctrain::progress::Phase::kForward;
  s.counter = g_counter.load();
  s.first = 0;
  return s;
}

struct Rank {
  double joined = -1;  // seconds from the start
  std::string error;
  c10::intrusive_ptr<c10d::TCPStore> tcp;  // the join's connection, kept open as the worker's is
  std::shared_ptr<const std::vector<std::string>> hosts;
  std::string token;
  std::unique_ptr<dist::Heartbeat> heartbeat;
  std::atomic<bool> claimed{false};  // by the first verdict, which writes `line`, then `ended`
  std::atomic<double> ended{-1};     // seconds from the start, when a verdict ended it
  std::string line;                  // its verdict: read once `ended` is set
};

struct Args {
  int ranks = 1024, per_node = 8, timeout_s = 10, steady_s = 10, writers = 16, baseline = 64;
  int saves = 5;                 // checkpoint saves per count; their median commit is reported
  bool checkpoint_only = false;  // only the checkpoint saves: no store, no join, no heartbeat
  int64_t rank_bytes = 16384, shared_bytes = 1 << 20;
  std::string dir;
  bool verdict = true;
  bool underived = false;  // the hosts not derivable (torchrun): read from the store
};

// What srun tells rank `rank`: the step's node list and tasks per node, its node and local rank.
dist::WorldInfo slurm_world(int rank, const Args& a) {
  dist::WorldInfo w;
  w.source = dist::EnvSource::kSlurm;
  w.rank = rank;
  w.world_size = a.ranks;
  w.node_index = rank / a.per_node;
  w.local_rank = rank % a.per_node;
  w.num_nodes = (a.ranks + a.per_node - 1) / a.per_node;
  for (int n = 0; n < w.num_nodes; ++n) {
    w.nodes.push_back(host_of(n * a.per_node, a.per_node));
    w.tasks_per_node.push_back(std::min(a.per_node, a.ranks - n * a.per_node));
  }
  w.local_world_size = w.tasks_per_node[static_cast<size_t>(w.node_index)];
  w.hostname = w.nodes[static_cast<size_t>(w.node_index)];
  return w;
}

// Runs `work(r)` for every rank on `writers` threads.
template <class Work>
void on_pool(int ranks, int writers, Work work) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int w = 0; w < writers; ++w) {
    pool.emplace_back([&] {
      for (int r = next++; r < ranks; r = next++) work(r);
    });
  }
  for (auto& t : pool) t.join();
}

// `a.saves` saves of `ranks` ranks (--per-node a node) into `dir`, each the checkpoint store's
// three phases: every rank's part, then every node leader's merge, each phase by a pool of writer
// threads (on a cluster each rank writes its own, in parallel), then rank 0's commit, timed
// (retention included: from the third save on it retires the oldest, whose files a thread of
// rank 0's removes in the background, timed apart). Reports each phase's median over the saves,
// the slowest commit and removal, the files in a step's directory and manifest.json's size.
nlohmann::json checkpoint_round(const Args& a, int ranks, const std::string& dir) {
  namespace ck = hpctrain::checkpoint;
  fs::remove_all(dir);
  ck::StoreOptions options;
  options.keep_last = 2;
  options.report = [](const std::string& line) { std::cerr << "checkpoint: " << line << "\n"; };
  std::vector<int> labels;
  for (int r = 0; r < ranks; ++r) labels.push_back(r / a.per_node);
  const auto layout = std::make_shared<const ck::NodeLayout>(labels);
  std::vector<std::unique_ptr<ck::Store>> stores;
  for (int r = 0; r < ranks; ++r) {
    stores.push_back(std::make_unique<ck::Store>(dir, options, r, layout));
  }
  stores[0]->clean_leftovers();
  const std::string rank_bytes(static_cast<size_t>(a.rank_bytes), 'r');
  const std::string shared_bytes(static_cast<size_t>(a.shared_bytes), 's');
  std::vector<double> write_s, merge_s, commit_s, retire_s;
  int64_t step = 0;
  for (int save = 0; save < a.saves; ++save) {
    step += 100;
    std::atomic<int> failed{0};
    const auto t0 = Clock::now();
    on_pool(ranks, a.writers, [&](int r) {
      ck::Part part;
      part.files["rng-" + std::to_string(r) + ".bin"] = rank_bytes;
      if (r == 0) part.files["model.pt"] = shared_bytes;
      if (!stores[static_cast<size_t>(r)]->write_part(step, part)) ++failed;
    });
    write_s.push_back(since(t0));
    const auto t1 = Clock::now();
    on_pool(ranks, a.writers, [&](int r) {
      const ck::WriteResult merged = stores[static_cast<size_t>(r)]->merge_node(step);
      if (!merged) {
        ++failed;
        std::cerr << "emulate: rank " << r << "'s merge: " << merged.error << "\n";
      }
    });
    merge_s.push_back(since(t1));
    if (failed) throw std::runtime_error(std::to_string(failed.load()) + " parts failed");
    const auto t2 = Clock::now();
    stores[0]->commit(step, nlohmann::json::object());
    commit_s.push_back(since(t2));
    const auto t3 = Clock::now();
    stores[0]->wait_retired();  // off the commit's path: the ranks train meanwhile
    retire_s.push_back(since(t3));
  }
  const std::string step_dir = dir + "/" + ck::Store::step_name(step);
  int64_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(step_dir)) ++files;
  return {{"ranks", ranks},
          {"saves", a.saves},
          {"write_s", percentile(write_s, 0.5)},
          {"merge_s", percentile(merge_s, 0.5)},
          {"commit_s", percentile(commit_s, 0.5)},
          {"commit_max_s", percentile(commit_s, 1.0)},
          {"retire_max_s", percentile(retire_s, 1.0)},
          {"files", files},
          {"manifest_bytes", fs::file_size(step_dir + "/manifest.json")}};
}

// The emulated job: the store process, every rank, rank 0's watch rounds.
class Emulation {
 public:
  explicit Emulation(const Args& a)
      : a_(a),
        derived_(std::make_shared<const std::vector<std::string>>(
            dist::derive_rank_hosts(slurm_world(0, a)))),
        server_(start_store()),
        t0_(Clock::now()),
        ranks_(static_cast<size_t>(a.ranks)) {}

  // Every rank connects and joins, each on a thread of its own (they wait for each other).
  void join(nlohmann::json& out) {
    const double cpu0 = server_.cpu_seconds();
    std::vector<std::thread> threads;
    threads.reserve(ranks_.size());
    for (int r = 0; r < a_.ranks; ++r) threads.emplace_back([this, r] { join_rank(r); });
    for (auto& t : threads) t.join();
    out["startup_s"] = since(t0_);
    out["startup_store_cpu_s"] = server_.cpu_seconds() - cpu0;
    out["startup_ops"] = g_ops.load();
    std::vector<double> joined;
    for (const Rank& r : ranks_) {
      if (r.error.empty()) joined.push_back(r.joined);
    }
    out["joined_p50_s"] = percentile(joined, 0.5);
    out["joined_last_s"] = percentile(joined, 1.0);
  }

  // The heartbeats, from a pool of threads (the join's threads and the heartbeats' together would
  // pass the kernel's thread limit, pid_max, sooner); rank 0's last, as on a cluster, where every
  // rank starts its own at once, rank 0 does not watch the others' start for seconds.
  void start_heartbeats(nlohmann::json& out) {
    const auto t = Clock::now();
    on_pool(a_.ranks - 1, 32, [this](int r) { start_heartbeat(r + 1); });
    start_heartbeat(0);
    out["heartbeats_started_s"] = since(t);
  }

  // False (after saying why) when some rank failed to join or to start beating.
  bool all_started() const {
    int errors = 0;
    for (const Rank& r : ranks_) {
      if (r.error.empty()) continue;
      if (errors++ < 3) std::cerr << "emulate: a rank failed: " << r.error << "\n";
    }
    if (errors) std::cerr << "emulate: " << errors << " of " << a_.ranks << " ranks failed\n";
    return errors == 0;
  }

  // Training goes on (the progress moves a few times a second); after the beats settled, the
  // store's load over the window.
  void steady_state(nlohmann::json& out) {
    std::thread([] {
      for (;;) {
        std::this_thread::sleep_for(200ms);
        ++g_counter;
        if (g_counter % 5 == 0) ++g_step;
      }
    }).detach();
    std::this_thread::sleep_for(3s);
    collect_rounds(true);
    const int64_t ops0 = g_ops.load(), keys0 = g_keys.load();
    const double c0 = server_.cpu_seconds();
    const auto w0 = Clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(a_.steady_s));
    const double window = since(w0);
    out["steady_ops_per_s"] = static_cast<double>(g_ops.load() - ops0) / window;
    out["steady_keys_per_s"] = static_cast<double>(g_keys.load() - keys0) / window;
    out["steady_store_cpu"] = (server_.cpu_seconds() - c0) / window;
    const std::vector<double> rounds = collect_rounds(true);
    out["watch_round_p50_ms"] = percentile(rounds, 0.5);
    out["watch_round_max_ms"] = percentile(rounds, 1.0);
    int ended = 0;
    for (const Rank& r : ranks_) ended += r.ended.load() >= 0;
    out["ended_before_the_verdict"] = ended;
  }

  // A rank in the middle, not the first of its node, stops (SIGSTOP's effect on a rank: its beats
  // and progress stand still; its process says nothing); until every other rank has a verdict.
  void silent_rank(nlohmann::json& out) {
    const int n = a_.ranks;
    const int silent = std::min(n - 1, n / 2 + (a_.per_node > 1 ? 1 : 0));
    const double c1 = server_.cpu_seconds();
    const double frozen_at = since(t0_);
    g_frozen.store(silent);
    const auto deadline = Clock::now() + std::chrono::seconds(a_.timeout_s + 120);
    int done = 0;
    while (Clock::now() < deadline) {
      done = 0;
      for (int r = 0; r < n; ++r) done += r != silent && rank(r).ended >= 0;
      if (done == n - 1) break;
      std::this_thread::sleep_for(100ms);
    }
    double first = 1e9, last = 0;
    for (int r = 0; r < n; ++r) {
      const double e = rank(r).ended.load();
      if (r == silent || e < 0) continue;
      first = std::min(first, e - frozen_at);
      last = std::max(last, e - frozen_at);
    }
    const Rank& witness = rank(silent == 1 ? 2 : 1);
    std::string line = witness.ended.load() >= 0 ? witness.line : std::string();
    if (!line.empty() && line.back() == '\n') line.pop_back();
    out["verdict"] = {{"silent_rank", silent},
                      {"silent_host", host_of(silent, a_.per_node)},
                      {"ranks_with_verdict", done},
                      {"first_s", first},
                      {"every_rank_s", last},
                      {"store_cpu", (server_.cpu_seconds() - c1) / (since(t0_) - frozen_at)},
                      {"watch_round_max_ms", percentile(collect_rounds(false), 1.0)},
                      {"line_of_rank_1", line}};
  }

  void end(nlohmann::json& out) {
    out["store_peak_mib"] = server_.peak_mib();
    ::kill(server_.pid, SIGKILL);
  }

 private:
  Rank& rank(int r) { return ranks_[static_cast<size_t>(r)]; }
  std::string store_address() const { return "127.0.0.1:" + std::to_string(server_.port); }

  void join_rank(int r) {
    Rank& me = rank(r);
    try {
      c10d::TCPStoreOptions o;
      o.port = static_cast<std::uint16_t>(server_.port);
      o.isServer = false;
      o.waitWorkers = false;
      o.timeout = std::chrono::milliseconds(600000);
      me.tcp = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
      CountingStore store(dist::c10d_kv_store(me.tcp));
      dist::StoreJoinOptions j;
      j.rank = r;
      j.world_size = a_.ranks;
      j.hostname = host_of(r, a_.per_node);
      j.store_address = store_address();
      j.timeout = 600s;
      j.job = "the emulated job";  // checked as the worker's is: one more operation a rank
      if (!a_.underived) {
        // Every rank derives the hosts itself, as the worker does; the emulator keeps one copy.
        if (dist::derive_rank_hosts(slurm_world(r, a_)) != *derived_) {
          throw std::runtime_error("rank " + std::to_string(r) + " derived other hosts");
        }
        j.hosts = derived_;
      }
      dist::Joined joined = dist::join_on_store(store, j);
      me.joined = since(t0_);
      me.hosts = one_copy(joined.hosts);
      me.token = joined.token;
    } catch (const std::exception& e) {
      me.error = e.what();
    }
  }

  void start_heartbeat(int r) {
    Rank& me = rank(r);
    if (!me.error.empty()) return;
    try {
      dist::HeartbeatOptions h;
      h.rank = r;
      h.world_size = a_.ranks;
      h.hosts = me.hosts;
      h.board_token = me.token;
      h.store_address = store_address();
      h.timeout = std::chrono::seconds(a_.timeout_s);
      h.dump_stacks = false;
      h.progress = [r] { return progress_of(r); };
      h.on_end = [&me, t0 = t0_](int, const std::string& line) {
        if (me.claimed.exchange(true)) return;
        me.line = line;
        me.ended.store(since(t0));  // after the line: a reader that sees `ended` sees the line
      };
      if (r == 0) {
        h.on_watch_round = [this](std::chrono::microseconds d) {
          std::lock_guard<std::mutex> lock(rounds_mutex_);
          if (watching_) rounds_.push_back(static_cast<double>(d.count()) / 1000.0);
        };
      }
      me.heartbeat = std::make_unique<dist::Heartbeat>(
          dist::lazy_kv_store([tcp = me.tcp] {
            return std::make_unique<CountingStore>(dist::c10d_kv_store(tcp->clone()));
          }),
          h);
    } catch (const std::exception& e) {
      me.error = e.what();
    }
  }

  // The emulator keeps one copy of the hosts every rank holds alike (10,240 copies of 10,240
  // names would be gigabytes here, megabytes on a cluster: 300 KB a rank).
  std::shared_ptr<const std::vector<std::string>> one_copy(
      std::shared_ptr<const std::vector<std::string>> hosts) {
    std::lock_guard<std::mutex> lock(hosts_mutex_);
    if (!hosts_ && hosts) hosts_ = hosts;
    return hosts && hosts_ && *hosts == *hosts_ ? hosts_ : hosts;
  }

  // Rank 0's watch rounds (ms) since the last call; from now on collected or not.
  std::vector<double> collect_rounds(bool go_on) {
    std::lock_guard<std::mutex> lock(rounds_mutex_);
    watching_ = go_on;
    std::vector<double> out;
    out.swap(rounds_);
    return out;
  }

  const Args& a_;
  std::shared_ptr<const std::vector<std::string>> derived_;
  StoreProcess server_;
  Clock::time_point t0_;
  std::vector<Rank> ranks_;
  std::mutex hosts_mutex_;
  std::shared_ptr<const std::vector<std::string>> hosts_;  // guarded by hosts_mutex_
  std::mutex rounds_mutex_;
  std::vector<double> rounds_;  // guarded by rounds_mutex_
  bool watching_ = false;       // guarded by rounds_mutex_
};

// A descriptor a rank (the join's connection) and one a node (its leader's heartbeat
// connection; the store's side of each is the store process's): the soft limit raised to the hard
// one. False when even that is too low.
bool enough_descriptors(const Args& a) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  const rlim_t need = static_cast<rlim_t>(a.ranks + (a.ranks + a.per_node - 1) / a.per_node + 1024);
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_max >= need) return true;
  std::cerr << "emulate: " << a.ranks << " ranks need " << need
            << " file descriptors in this process and in the store's; the hard limit is "
            << lim.rlim_max << "\n";
  return false;
}

// The checkpoint saves at --ranks and at --ckpt-baseline ranks, into out["checkpoint"] and
// out["checkpoint_baseline"]; a failure into out["checkpoint_error"].
void checkpoints(const Args& a, nlohmann::json& out) {
  try {
    out["checkpoint"] = checkpoint_round(a, a.ranks, a.dir + "/ckpt-" + std::to_string(a.ranks));
    if (a.baseline > 0) {
      out["checkpoint_baseline"] =
          checkpoint_round(a, a.baseline, a.dir + "/ckpt-" + std::to_string(a.baseline));
    }
  } catch (const std::exception& e) {
    out["checkpoint_error"] = e.what();
  }
}

void peak_memory(nlohmann::json& out) {
  rusage self{};
  ::getrusage(RUSAGE_SELF, &self);
  out["peak_mib"] = static_cast<double>(self.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Emulates many ranks of hpctrain in one process (bench/scale/README.md)."};
  Args a;
  app.add_option("--ranks", a.ranks, "emulated ranks")->check(CLI::Range(2, 1 << 20));
  app.add_option("--per-node", a.per_node, "ranks per node")->check(CLI::Range(1, 1024));
  app.add_option("--timeout", a.timeout_s, "heartbeat timeout, seconds")->check(CLI::Range(2, 600));
  app.add_option("--steady", a.steady_s, "steady-state window, seconds")->check(CLI::Range(1, 600));
  app.add_option("--dir", a.dir, "directory for the checkpoint rounds (emptied)")->required();
  app.add_option("--writers", a.writers, "threads writing the parts")->check(CLI::Range(1, 1024));
  app.add_option("--rank-bytes", a.rank_bytes, "bytes of each rank's own file");
  app.add_option("--shared-bytes", a.shared_bytes, "bytes of rank 0's shared file");
  app.add_option("--ckpt-baseline", a.baseline, "ranks of the comparison save (0: none)");
  app.add_option("--saves", a.saves, "checkpoint saves per count (median reported)")
      ->check(CLI::Range(1, 100));
  app.add_flag("!--no-verdict", a.verdict, "skip the planted silent rank");
  app.add_flag("--checkpoint-only", a.checkpoint_only, "only the checkpoint saves");
  app.add_flag("--underived", a.underived, "hosts not derivable (torchrun): read from the store");
  CLI11_PARSE(app, argc, argv);
  if (!enough_descriptors(a)) return 2;
  fs::create_directories(a.dir);

  nlohmann::json out = {{"ranks", a.ranks},
                        {"per_node", a.per_node},
                        {"nodes", (a.ranks + a.per_node - 1) / a.per_node},
                        {"timeout_s", a.timeout_s},
                        {"hosts", a.underived ? "store" : "derived"}};
  if (a.checkpoint_only) {
    checkpoints(a, out);
    peak_memory(out);
    std::cout << out.dump() << std::endl;
    return 0;
  }
  Emulation job(a);
  job.join(out);
  job.start_heartbeats(out);
  if (!job.all_started()) ::_exit(1);
  job.steady_state(out);
  if (a.verdict) job.silent_rank(out);
  checkpoints(a, out);
  peak_memory(out);
  job.end(out);
  std::cout << out.dump() << std::endl;
  // The heartbeats' threads are still running (a frozen one for good): no destructors.
  ::_exit(0);
}
