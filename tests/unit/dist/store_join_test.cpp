// dist/store_join.hpp on an in-memory store (memory_kv_store.hpp), its ranks threads of this
// process: every rank joins in a fixed number of store operations and learns the same token and
// hosts (derived, or read from the store when any rank could not derive them); a rank that never
// arrives is named by rank 0 and every other rank throws the same verdict.
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
      StoreJoinOptions o;
      o.rank = r;
      o.world_size = world;
      o.hostname = "host" + std::to_string(r / 2);
      o.store_address = "host0:29500";
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
    // set, add, get; the last to arrive also reads the count and posts the outcome. No polling.
    EXPECT_LE(o.ops, 5) << "rank " << r;
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
