// dist/store_join.hpp on an in-memory store (memory_kv_store.hpp), its ranks threads of this
// process: every rank joins in a fixed number of store operations and learns the same token and
// hosts (derived, or read from the store when any rank could not derive them); a rank that never
// arrives is named by rank 0 and every other rank throws the same verdict; a rank of another job,
// or a second rank with one RANK, is refused without breaking the job whose store it reached.
#include "dist/store_join.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "memory_kv_store.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;
using Hosts = std::shared_ptr<const std::vector<std::string>>;

// Counts the round trips of one connection.
class Counting final : public KvStore {
 public:
  explicit Counting(std::unique_ptr<KvStore> inner) : inner_(std::move(inner)) {}
  int64_t add(const std::string& k, int64_t d) override { return ++ops, inner_->add(k, d); }
  void set(const std::string& k, const std::string& v) override { ++ops, inner_->set(k, v); }
  std::string get(const std::string& k) override { return ++ops, inner_->get(k); }
  bool check(const std::string& k) override { return ++ops, inner_->check(k); }
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    return ++ops, inner_->multi_get(keys);
  }
  void set_timeout(std::chrono::milliseconds t) override { inner_->set_timeout(t); }
  int ops = 0;

 private:
  std::unique_ptr<KvStore> inner_;
};

struct Outcome {
  Joined joined;
  std::string error;
  int ops = 0;
};

// Rank `rank` of `world` on host0, store host0:29500, a 5 s deadline.
StoreJoinOptions member(int rank, int world, const std::string& job) {
  StoreJoinOptions o;
  o.rank = rank;
  o.world_size = world;
  o.hostname = "host0";
  o.store_address = "host0:29500";
  o.timeout = 5s;
  o.job = job;
  return o;
}

// `world` ranks join, rank r with derived[r] (null: not derivable), those in `absent` never.
std::vector<Outcome> join_all(int world, const std::vector<Hosts>& derived,
                              std::chrono::milliseconds timeout, std::vector<int> absent = {}) {
  const MemoryKvStore store;
  std::vector<Outcome> out(static_cast<size_t>(world));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    if (std::find(absent.begin(), absent.end(), r) != absent.end()) continue;
    ranks.emplace_back([&, r] {
      Counting conn(store.connection());
      StoreJoinOptions o = member(r, world, "run directory /runs/a");
      o.hostname = "host" + std::to_string(r / 2);
      o.timeout = timeout;
      o.hosts = derived[static_cast<size_t>(r)];
      try {
        out[static_cast<size_t>(r)].joined = join_on_store(conn, o);
      } catch (const rt::PeerError& e) {
        out[static_cast<size_t>(r)].error = e.message();
      }
      out[static_cast<size_t>(r)].ops = conn.ops;
    });
  }
  for (auto& t : ranks) t.join();
  return out;
}

TEST(StoreJoin, DerivedHostsAFewOperationsEachAndOneToken) {
  const auto hosts = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"host0", "host0", "host1", "host1", "host2", "host2"});
  const auto out = join_all(6, std::vector<Hosts>(6, hosts), 5s);
  for (int r = 0; r < 6; ++r) {
    const Outcome& o = out[static_cast<size_t>(r)];
    ASSERT_EQ(o.error, "") << "rank " << r;
    EXPECT_EQ(*o.joined.hosts, *hosts);
    EXPECT_FALSE(o.joined.hosts_from_store);
    EXPECT_EQ(o.joined.token, out[0].joined.token) << "rank " << r;
    // The job (rank 0 posts it, the others read it), set, add, get; the last to arrive also
    // reads the count and posts the outcome. No polling.
    EXPECT_LE(o.ops, 6) << "rank " << r;
  }
  EXPECT_FALSE(out[0].joined.token.empty());
  EXPECT_NE(join_all(2, std::vector<Hosts>(2, nullptr), 5s)[0].joined.token,
            join_all(2, std::vector<Hosts>(2, nullptr), 5s)[0].joined.token)
      << "a new token for every join";
}

TEST(StoreJoin, OneRankThatCannotDeriveMakesEveryoneReadTheStore) {
  const auto hosts = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"host0", "host0", "host1", "host1"});
  std::vector<Hosts> derived(4, hosts);
  derived[3] = nullptr;
  const auto out = join_all(4, derived, 5s);
  for (int r = 0; r < 4; ++r) {
    const Outcome& o = out[static_cast<size_t>(r)];
    ASSERT_EQ(o.error, "") << "rank " << r;
    EXPECT_TRUE(o.joined.hosts_from_store) << "rank " << r;
    // What each rank set as its host: "host" + rank / 2.
    EXPECT_EQ(*o.joined.hosts, (std::vector<std::string>{"host0", "host0", "host1", "host1"}));
  }
}

TEST(StoreJoin, ARankThatNeverArrivesIsNamedByEveryRank) {
  const auto out = join_all(4, std::vector<Hosts>(4, nullptr), 300ms, {2});
  for (const int r : {0, 1, 3}) {
    EXPECT_EQ(out[static_cast<size_t>(r)].error,
              "rendezvous timed out after 0 s: 1 of 4 ranks never arrived: 2; arrived: 0 (host0), "
              "1 (host0), 3 (host1)")
        << "rank " << r;
  }
}

// `o` joins `store` on a thread of its own; the error it threw, if any, in `error`.
std::thread join_on_thread(const MemoryKvStore& store, StoreJoinOptions o, std::string& error) {
  return std::thread([&store, o, &error] {
    auto conn = store.connection();
    try {
      join_on_store(*conn, o);
    } catch (const rt::PeerError& e) {
      error = e.message();
    }
  });
}

// Two tests running side by side once drew one port: the second job's rank 0 could not listen,
// and its rank 1 reached the first job's store and counted itself in there.
TEST(StoreJoin, ARankOfAnotherJobIsRefusedAndWritesNothing) {
  const MemoryKvStore store;
  std::string rank0_error = "unset", stranger_error, rank1_error = "unset";
  std::thread rank0 = join_on_thread(store, member(0, 2, "run directory /runs/a"), rank0_error);
  auto look = store.connection();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (look->add("arrived", 0) < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(look->add("arrived", 0), 1) << "rank 0 did not count itself in";
  std::thread stranger =
      join_on_thread(store, member(1, 2, "run directory /runs/b"), stranger_error);
  stranger.join();
  EXPECT_EQ(stranger_error,
            "the rendezvous store at host0:29500 serves another job (run directory /runs/a, 2 "
            "ranks), not this rank's (run directory /runs/b, 2 ranks): that job's rank 0 holds the "
            "port, so this job's cannot listen on it; set MASTER_PORT to a free port. This rank "
            "wrote nothing there");
  EXPECT_FALSE(look->check("host/1")) << "the stranger set its host key";
  EXPECT_EQ(look->add("arrived", 0), 1) << "only rank 0 counted in";
  // The job whose store it was goes on as if nothing happened.
  std::thread rank1 = join_on_thread(store, member(1, 2, "run directory /runs/a"), rank1_error);
  rank0.join();
  rank1.join();
  EXPECT_EQ(rank0_error, "unset");
  EXPECT_EQ(rank1_error, "unset");
}

TEST(StoreJoin, TheSameJobWithAnotherWorldSizeIsAnotherJob) {
  const MemoryKvStore store;
  std::string rank0_error = "unset", other_error;
  std::thread rank0 = join_on_thread(store, member(0, 2, "Slurm job 7 step 0"), rank0_error);
  std::thread other = join_on_thread(store, member(3, 4, "Slurm job 7 step 0"), other_error);
  other.join();
  EXPECT_NE(other_error.find("serves another job (Slurm job 7 step 0, 2 ranks), not this rank's "
                             "(Slurm job 7 step 0, 4 ranks)"),
            std::string::npos)
      << other_error;
  std::string rank1_error = "unset";
  std::thread rank1 = join_on_thread(store, member(1, 2, "Slurm job 7 step 0"), rank1_error);
  rank0.join();
  rank1.join();
  EXPECT_EQ(rank0_error, "unset");
}

TEST(StoreJoin, ASecondRankWithOneRankNumberIsRefused) {
  const MemoryKvStore store;
  std::string errors[3] = {"unset", "unset", "unset"};
  std::vector<std::thread> ranks;
  ranks.push_back(join_on_thread(store, member(0, 2, "job"), errors[0]));
  ranks.push_back(join_on_thread(store, member(1, 2, "job"), errors[1]));
  for (auto& t : ranks) t.join();
  std::thread again = join_on_thread(store, member(1, 2, "job"), errors[2]);
  again.join();
  EXPECT_EQ(errors[0], "unset");
  EXPECT_EQ(errors[1], "unset");
  EXPECT_EQ(errors[2],
            "rank 1 arrived at the rendezvous at host0:29500 as number 3 of 2 ranks: two ranks "
            "have the same RANK (or a rank of this job started twice); the job cannot go on");
}

TEST(StoreJoin, AStoreThatNeverSaysItsJobIsNamedAtTheDeadline) {
  const MemoryKvStore store;  // no rank 0 posts the job (another program's store, say)
  StoreJoinOptions o = member(1, 2, "job");
  o.timeout = 200ms;
  std::string error;
  join_on_thread(store, o, error).join();
  EXPECT_EQ(error.rfind("the rendezvous store at host0:29500 did not say which job it serves "
                        "within 0 s (",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find("): it is not this job's rank 0, or that rank 0 is stuck"),
            std::string::npos)
      << error;
  EXPECT_FALSE(store.connection()->check("arrived")) << "it counted itself in";
}

// The heartbeat's members hold a connection made only when first used, with the timeout set
// before it.
TEST(LazyKvStore, ConnectsOnTheFirstCallWithTheTimeoutSetBefore) {
  const MemoryKvStore memory;
  int connects = 0;
  auto lazy = lazy_kv_store([&] {
    ++connects;
    return memory.connection();
  });
  lazy->set_timeout(50ms);
  EXPECT_EQ(connects, 0);
  lazy->set("k", "v");
  EXPECT_EQ(lazy->get("k"), "v");
  EXPECT_EQ(connects, 1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(lazy->get("missing"), std::exception);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "the timeout set before it connected";
}

TEST(StoreJoin, LongListsOfRanksAreCut) {
  std::vector<int> many;
  for (int r = 0; r < 250; ++r) many.push_back(r);
  const std::string text = list_ranks(many, {});
  EXPECT_NE(text.find("99, ... (150 more)"), std::string::npos) << text;
}

}  // namespace
}  // namespace hpctrain::dist
