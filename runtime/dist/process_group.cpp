#include "dist/process_group.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/types.h>
#include <chrono>
#include <future>
#include <memory>
#include <sstream>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/error.hpp"
#include "dist/c10d_kv_store.hpp"
#include "dist/heartbeat.hpp"
#include "dist/pmix_exchange.hpp"
#ifdef HPCTRAIN_WITH_NCCL
#include "dist/nccl_backend.hpp"
#endif
#include "dist/ports.hpp"
#include "dist/store_join.hpp"
#include "spec/spec.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool resolves_to_loopback(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* result = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &result) != 0 || !result) return false;
  const auto* addr = reinterpret_cast<const sockaddr_in*>(result->ai_addr);
  const bool loopback = (ntohl(addr->sin_addr.s_addr) >> 24) == 127;
  ::freeaddrinfo(result);
  return loopback;
}

class C10dWork : public Work {
 public:
  C10dWork(c10::intrusive_ptr<c10d::Work> work, std::function<void(const std::string&)> on_error)
      : work_(std::move(work)), on_error_(std::move(on_error)) {}
  void wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      on_error_(e.what());  // throws
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::function<void(const std::string&)> on_error_;
};

class C10dGroup : public ProcessGroup, public Communicator {
 public:
  C10dGroup(const WorldInfo& world, RendezvousPlan plan, const JoinOptions& options)
      : world_(world), plan_(std::move(plan)), options_(options) {}

  void start(const EnvMap& env) {
    connect_store();
    register_and_wait();
    create_backend(env);
  }

  // ProcessGroup
  Communicator& communicator() override { return *this; }
  const std::vector<std::string>& hosts() const override { return *hosts_; }
  const RendezvousPlan& plan() const override { return plan_; }
  std::string store_address() const override { return host_ + ":" + std::to_string(port_); }

  void start_heartbeat(HeartbeatOptions o) override {
    if (world_.world_size < 2 || heartbeat_) return;
    o.rank = world_.rank;
    o.world_size = world_.world_size;
    o.hosts = hosts_;  // shared
    o.store_address = store_address();
    o.board_token = token_;
    try {
      // Its own connection, made when first used: a node's members talk to the store only to
      // carry out a hang verdict.
      heartbeat_ = std::make_unique<Heartbeat>(
          lazy_kv_store([store = store_] { return c10d_kv_store(store->clone()); }), o);
    } catch (const std::exception& e) {
      HPCTRAIN_THROW(rt::PeerError, "cannot start the heartbeat on the store at " +
                                        store_address() + ": " + first_line(e.what()));
    }
  }

  void leave() override {
    if (heartbeat_) heartbeat_->leave();
  }

  // Communicator
  int rank() const override { return world_.rank; }
  int size() const override { return world_.world_size; }
  std::string backend() const override { return options_.backend; }
  at::Device device() const override {
    return options_.backend == "nccl"
               ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(options_.cuda_device))
               : at::Device(at::kCPU);
  }

  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    return std::make_unique<C10dWork>(guard([&] { return pg_->allreduce(tensors); }),
                                      [this](const std::string& e) { fail(e); });
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      C10dWork(guard([&] { return pg_->broadcast(one, opts); }), [this](const std::string& e) {
        fail(e);
      }).wait();
    }
  }

  void barrier() override {
    // A barrier is an all-reduce of one element: it has the collective deadline and the same
    // failure diagnosis as everything else. On NCCL a plain wait only orders the GPU's stream;
    // a barrier must hold this thread until every rank has really arrived (rank 0 finished
    // cleaning up before the others read a checkpoint, say).
    auto one = torch::zeros({1}, torch::TensorOptions().device(device()));
    if (!one.is_cuda()) {
      all_reduce(one);
      return;
    }
    // A wait with a timeout blocks this thread until the all-reduce completed on the GPU, or
    // throws at the collective deadline.
    std::vector<at::Tensor> tensors{one};
    auto work = guard([&] { return pg_->allreduce(tensors); });
    try {
      work->wait(
          std::chrono::duration_cast<std::chrono::milliseconds>(options_.collective_timeout));
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }

  void abort() override {
    if (pg_) pg_->abort();
  }

 private:
  template <typename F>
  c10::intrusive_ptr<c10d::Work> guard(F&& launch) {
    try {
      return launch();
    } catch (const std::exception& e) {
      fail(e.what());
    }
    return {};
  }

  void connect_store() {
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.rendezvous_timeout);
    int listen_fd = -1;
    const bool server = world_.rank == 0 && !plan_.agent_store;
    host_ = plan_.host;
    port_ = plan_.port;
    if (server) {
      try {
        std::tie(listen_fd, port_) = bind_listen_socket(plan_.port);
      } catch (const rt::Error& e) {
        HPCTRAIN_THROW(rt::PeerError, std::string("rank 0 cannot listen for the rendezvous on ") +
                                          world_.hostname + ":" + std::to_string(plan_.port) +
                                          " (" + plan_.port_source + "): " + e.message() +
                                          "; set MASTER_PORT to a free port");
      }
    }
    if (plan_.method == "pmix") {
      PmixSession pmix;
      if (pmix.rank() != world_.rank) {
        HPCTRAIN_THROW(rt::Error, "PMIx says this is rank " + std::to_string(pmix.rank()) +
                                      " but the environment says rank " +
                                      std::to_string(world_.rank));
      }
      const std::string published =
          pmix.exchange_from_rank0("hpctrain.store", world_.hostname + ":" + std::to_string(port_),
                                   options_.rendezvous_timeout);
      const auto colon = published.rfind(':');
      host_ = published.substr(0, colon);
      port_ = std::stoi(published.substr(colon + 1));
    }
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<std::uint16_t>(port_);
    opts.isServer = server;
    opts.numWorkers = std::nullopt;  // we wait ourselves, to name the ranks that are missing
    opts.waitWorkers = false;
    opts.timeout = timeout;
    if (server) opts.masterListenFd = listen_fd;
    const std::string unreachable = "cannot reach the rendezvous store of rank 0 at " + host_ +
                                    ":" + std::to_string(port_) + " within " +
                                    std::to_string(options_.rendezvous_timeout.count()) +
                                    " s (is rank 0 running? " + plan_.port_source + ")";
    // c10d's client connect outlives its timeout: it tries twice, each for the whole timeout (a
    // rank whose rank 0 had exited before listening waited 1,200 s with a 600 s deadline). So the
    // store is made on a thread of its own and waited for with our deadline; past it this rank
    // stops with the error, and the thread, still in c10d's connect, ends with the process.
    auto made = std::make_shared<std::promise<c10::intrusive_ptr<c10d::TCPStore>>>();
    auto store = made->get_future();
    std::thread([made, where = server ? std::string("0.0.0.0") : host_, opts] {
      try {
        made->set_value(c10::make_intrusive<c10d::TCPStore>(where, opts));
      } catch (...) {
        made->set_exception(std::current_exception());
      }
    }).detach();
    if (store.wait_for(options_.rendezvous_timeout + std::chrono::seconds(2)) !=
        std::future_status::ready) {
      HPCTRAIN_THROW(rt::PeerError, unreachable + ": no answer");
    }
    try {
      store_ = store.get();
    } catch (const std::exception& e) {
      HPCTRAIN_THROW(rt::PeerError, unreachable + ": " + first_line(e.what()));
    }
  }

  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

  // Every rank counts itself in and waits for the others (dist/store_join.hpp).
  void register_and_wait() {
    StoreJoinOptions o;
    o.rank = world_.rank;
    o.world_size = world_.world_size;
    o.hostname = world_.hostname;
    o.store_address = host_ + ":" + std::to_string(port_);
    o.job = options_.job;
    o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.rendezvous_timeout);
    auto derived = derive_rank_hosts(world_);
    if (!derived.empty())
      o.hosts = std::make_shared<const std::vector<std::string>>(std::move(derived));
    Joined joined = join_on_store(*c10d_kv_store(store_), o);
    hosts_ = std::move(joined.hosts);
    token_ = std::move(joined.token);
  }

  // The ranks whose key is not set, asked key by key (to name them once a deadline has passed).
  static std::vector<int> missing_keys(c10d::Store& store, const std::vector<std::string>& keys) {
    std::vector<int> missing;
    for (size_t r = 0; r < keys.size(); ++r) {
      if (!store.check({keys[r]})) missing.push_back(static_cast<int>(r));
    }
    return missing;
  }

  static std::string to_string(const std::vector<uint8_t>& bytes) {
    return std::string(bytes.begin(), bytes.end());
  }

  void create_backend(const EnvMap& env) {
    if (options_.backend == "nccl") {
#ifdef HPCTRAIN_WITH_NCCL
      try {
        pg_ = make_nccl_backend(
            c10::make_intrusive<c10d::PrefixStore>("nccl", store_), world_.rank, world_.world_size,
            std::chrono::duration_cast<std::chrono::milliseconds>(options_.collective_timeout),
            options_.cuda_device);
      } catch (const std::exception& e) {
        fail(e.what());
      }
      return;
#else
      HPCTRAIN_THROW(rt::Error, "the NCCL backend is not in this build (configure with CUDA)");
#endif
    }
    if (options_.backend != "gloo") {
      HPCTRAIN_THROW(rt::Error, "unknown backend '" + options_.backend + "'");
    }
    auto opts = c10d::ProcessGroupGloo::Options::create(
        std::chrono::duration_cast<std::chrono::milliseconds>(options_.collective_timeout));
    auto ifname = env.find("GLOO_SOCKET_IFNAME");
    if (ifname != env.end() && !ifname->second.empty()) {
      opts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForInterface(ifname->second, false));
    } else {
      // Several hosts and a hostname that resolves to 127.x: peers would be told to connect to
      // their own loopback. Catch it here with a message instead of a timeout later.
      // The hosts may be Slurm's node names (short) and this one a full name.
      const auto short_name = [](const std::string& h) { return h.substr(0, h.find('.')); };
      bool several_hosts = false;
      for (const auto& h : *hosts_) {
        several_hosts = several_hosts || short_name(h) != short_name(world_.hostname);
      }
      if (several_hosts && resolves_to_loopback(world_.hostname)) {
        HPCTRAIN_THROW(rt::Error, "this host's name '" + world_.hostname +
                                      "' resolves to a loopback address, so ranks on other hosts "
                                      "cannot reach it; fix /etc/hosts or set GLOO_SOCKET_IFNAME");
      }
      opts->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname(world_.hostname, false));
    }
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("gloo", store_);
    try {
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, world_.rank, world_.world_size,
                                                        opts);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }

  // A collective failed: find out which ranks are gone, then throw a PeerError naming them.
  [[noreturn]] void fail(const std::string& what) {
    const std::string cause = first_line(what);
    const std::string epoch = std::to_string(++failures_);
    std::vector<int> missing;
    try {
      missing = check_in(*store_, epoch);
    } catch (const std::exception& first) {
      // When a peer dies, this rank's existing store connection has been seen to be closed
      // under it although rank 0 is alive (tests/slurm/worker_failures.sh); a fresh connection
      // tells whether rank 0, which serves the store, is really gone.
      try {
        c10d::TCPStoreOptions opts;
        opts.port = static_cast<std::uint16_t>(port_);
        opts.isServer = false;
        opts.waitWorkers = false;
        opts.timeout = std::chrono::milliseconds(5000);
        auto fresh = c10::make_intrusive<c10d::TCPStore>(host_, opts);
        missing = check_in(*fresh, epoch);
      } catch (const std::exception& e) {
        // Rank 0's store can stop serving the others after a peer dies while rank 0 lives on
        // (seen with both of c10d's store backends), so this does not prove rank 0 is gone.
        HPCTRAIN_THROW(rt::PeerError, "cannot reach the rendezvous store on rank 0" +
                                          host_suffix(0) +
                                          " to tell which ranks are gone; rank 0 may be lost (" +
                                          first_line(e.what()) + "); collective failed: " + cause);
      }
    }
    if (missing.empty()) {
      HPCTRAIN_THROW(rt::PeerError, "collective failed with every rank still reachable: " + cause);
    }
    HPCTRAIN_THROW(rt::PeerError, "lost rank" + std::string(missing.size() > 1 ? "s " : " ") +
                                      list_ranks(missing, *hosts_) + " (no check-in within " +
                                      std::to_string(check_in_grace().count()) +
                                      " s); collective failed: " + cause);
  }

  std::chrono::seconds check_in_grace() const {
    return std::min<std::chrono::seconds>(options_.collective_timeout, 10s);
  }

  // Marks this rank alive for failure `epoch` and waits (10 s at most, within the collective
  // deadline) for the others to do the same; returns the ranks that did not.
  std::vector<int> check_in(c10d::Store& store, const std::string& epoch) {
    store.set("alive/" + epoch + "/" + std::to_string(world_.rank), "1");
    store.add("alive/" + epoch, 1);
    const auto deadline = Clock::now() + check_in_grace();
    while (store.add("alive/" + epoch, 0) < world_.world_size) {
      if (Clock::now() >= deadline) {
        std::vector<std::string> keys;
        for (int r = 0; r < world_.world_size; ++r) {
          keys.push_back("alive/" + epoch + "/" + std::to_string(r));
        }
        return missing_keys(store, keys);
      }
      std::this_thread::sleep_for(200ms);
    }
    return {};
  }

  std::string host_suffix(int rank) const {
    if (static_cast<size_t>(rank) < hosts_->size()) return " (" + (*hosts_)[rank] + ")";
    return "";
  }

  WorldInfo world_;
  RendezvousPlan plan_;
  JoinOptions options_;
  std::string host_;
  int port_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> pg_;
  std::shared_ptr<const std::vector<std::string>> hosts_ =
      std::make_shared<const std::vector<std::string>>();
  std::string token_;  // the join's: names the heartbeat's node boards
  int failures_ = 0;
  std::unique_ptr<Heartbeat> heartbeat_;
};

}  // namespace

JoinOptions join_options_from_spec(const spec::Spec& spec) {
  JoinOptions o;
  o.rendezvous_timeout = std::chrono::seconds(spec.train.rendezvous_timeout_s);
  o.collective_timeout = std::chrono::seconds(spec.train.collective_timeout_s);
  return o;
}

std::unique_ptr<ProcessGroup> join(const WorldInfo& world, const EnvMap& env,
                                   const JoinOptions& options) {
  auto group = std::make_unique<C10dGroup>(world, plan_rendezvous(world, env), options);
  group->start(env);
  return group;
}

}  // namespace hpctrain::dist
