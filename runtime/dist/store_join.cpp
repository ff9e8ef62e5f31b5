#include "dist/store_join.hpp"

#include <algorithm>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "common/time.hpp"

namespace hpctrain::dist {
namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
std::string host_key(int rank) { return "host/" + std::to_string(rank); }
const std::string kArrived = "arrived";
const std::string kVerdict = "rendezvous/failed";

// The ranks whose host key is not set, asked key by key (to name them once the deadline passed).
std::vector<int> missing_ranks(KvStore& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    if (!store.check(host_key(r))) missing.push_back(r);
  }
  return missing;
}

}  // namespace

std::string list_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out << ", ";
    out << ranks[i];
    if (static_cast<size_t>(ranks[i]) < hosts.size() && !hosts[ranks[i]].empty()) {
      out << " (" << hosts[ranks[i]] << ")";
    }
  }
  return out.str();
}

std::vector<std::string> join_on_store(KvStore& store, const StoreJoinOptions& o) {
  const auto lost = [&](const std::exception& e) {
    return "lost the rendezvous store of rank 0 at " + o.store_address +
           " while waiting for ranks: " + first_line(e.what());
  };
  try {
    store.set(host_key(o.rank), o.hostname);
    store.add(kArrived, 1);
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::PeerError, lost(e));
  }
  const auto deadline = Clock::now() + o.timeout;
  std::vector<std::string> keys;
  for (int r = 0; r < o.world_size; ++r) keys.push_back(host_key(r));
  while (true) {
    std::vector<int> missing;
    try {
      // Rank 0 publishes its verdict when its deadline passes, so every rank reports the same
      // missing ranks instead of "lost the store" when rank 0 then exits.
      if (o.rank != 0 && store.check(kVerdict)) HPCTRAIN_THROW(rt::PeerError, store.get(kVerdict));
      if (store.add(kArrived, 0) >= o.world_size) break;
      if (Clock::now() >= deadline) {
        missing = missing_ranks(store, o.world_size);
        // Every key is there but not every count (a rank died between the two): all ranks did
        // arrive; one that is gone now is the collectives' and the heartbeat's to find.
        if (missing.empty()) break;
      }
    } catch (const rt::PeerError&) {
      throw;
    } catch (const std::exception& e) {
      HPCTRAIN_THROW(rt::PeerError, lost(e));
    }
    if (!missing.empty()) {
      std::vector<int> present;
      std::vector<std::string> hosts(static_cast<size_t>(o.world_size));
      for (int r = 0; r < o.world_size; ++r) {
        if (std::find(missing.begin(), missing.end(), r) != missing.end()) continue;
        present.push_back(r);
        hosts[static_cast<size_t>(r)] = store.get(keys[static_cast<size_t>(r)]);
      }
      const std::string verdict =
          "rendezvous timed out after " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()) +
          " s: " + std::to_string(missing.size()) + " of " + std::to_string(o.world_size) +
          " ranks never arrived: " + list_ranks(missing, {}) +
          "; arrived: " + list_ranks(present, hosts);
      if (o.rank == 0) {
        store.set(kVerdict, verdict);
        std::this_thread::sleep_for(o.poll * 10);  // the others poll every `poll`
      }
      HPCTRAIN_THROW(rt::PeerError, verdict);
    }
    std::this_thread::sleep_for(o.poll);
  }
  try {
    return store.multi_get(keys);
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::PeerError, lost(e));
  }
}

}  // namespace hpctrain::dist
