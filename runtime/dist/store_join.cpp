#include "dist/store_join.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <thread>

#include "common/error.hpp"
#include "common/time.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
std::string host_key(int rank) { return "host/" + std::to_string(rank); }
const std::string kArrived = "arrived";
// The job rank 0 serves and its world size (job_line()), posted before anything else.
const std::string kJob = "rendezvous/job";
// Ranks that could not derive the host list.
const std::string kUnderived = "hosts/underived";
// The outcome, posted by the last rank to arrive ("ok UNDERIVED TOKEN") or by rank 0 at its
// deadline ("failed VERDICT").
const std::string kOutcome = "rendezvous/outcome";
// Rank 0's deadline comes first: the others wait this much longer for its verdict.
constexpr std::chrono::milliseconds kGrace = 15s;

// The ranks whose host key is not set, asked key by key (to name them once the deadline passed).
std::vector<int> missing_ranks(KvStore& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    if (!store.check(host_key(r))) missing.push_back(r);
  }
  return missing;
}

std::string new_token() {
  std::random_device device;
  std::mt19937_64 gen((static_cast<uint64_t>(device()) << 32) ^ device() ^
                      static_cast<uint64_t>(::getpid()));
  std::ostringstream out;
  out << std::hex << gen();
  return out.str();
}

// Rank 0 at its deadline: which ranks never arrived, and where the others are.
std::string timeout_verdict(KvStore& store, const StoreJoinOptions& o) {
  const std::vector<int> missing = missing_ranks(store, o.world_size);
  std::vector<int> present;
  std::vector<std::string> hosts(static_cast<size_t>(o.world_size));
  for (int r = 0; r < o.world_size; ++r) {
    if (std::find(missing.begin(), missing.end(), r) != missing.end()) continue;
    present.push_back(r);
  }
  // Name the hosts of the first arrivals only: the line stays readable at 10,000 ranks.
  for (size_t i = 0; i < present.size() && i < 64; ++i) {
    hosts[static_cast<size_t>(present[i])] = store.get(host_key(present[i]));
  }
  return "rendezvous timed out after " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()) +
         " s: " + std::to_string(missing.size()) + " of " + std::to_string(o.world_size) +
         " ranks never arrived: " + list_ranks(missing, {}) +
         "; arrived: " + list_ranks(present, hosts);
}

std::string job_line(const StoreJoinOptions& o) {
  return o.job + ", " + std::to_string(o.world_size) + " ranks";
}

// Rank 0 posts which job its store serves; every other rank reads it before writing anything. A
// rank of another job (its own rank 0 could not listen on the port this job's holds, or had not
// yet) would otherwise count itself in here and break both jobs' rendezvous.
void check_job(KvStore& store, const StoreJoinOptions& o) {
  if (o.job.empty()) return;
  const std::string mine = job_line(o);
  if (o.rank == 0) {
    store.set(kJob, mine);
    return;
  }
  // Rank 0 posts it as soon as its store exists, before it waits for anyone: the rendezvous
  // timeout is ample.
  std::string served;
  store.set_timeout(o.timeout);
  try {
    served = store.get(kJob);
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(
        rt::PeerError,
        "the rendezvous store at " + o.store_address + " did not say which job it " +
            "serves within " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()) +
            " s (" + first_line(e.what()) +
            "): it is not this job's rank 0, or that rank 0 is stuck");
  }
  if (served != mine) {
    HPCTRAIN_THROW(rt::PeerError, "the rendezvous store at " + o.store_address +
                                      " serves another job (" + served + "), not this rank's (" +
                                      mine +
                                      "): that job's rank 0 holds the port, so this job's cannot "
                                      "listen on it; set MASTER_PORT to a free port. This rank "
                                      "wrote nothing there");
  }
}

}  // namespace

std::string list_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) out << ", ";
    if (i == 100 && ranks.size() > 101) {
      out << "... (" << ranks.size() - 100 << " more)";
      break;
    }
    out << ranks[i];
    if (static_cast<size_t>(ranks[i]) < hosts.size() && !hosts[ranks[i]].empty()) {
      out << " (" << hosts[ranks[i]] << ")";
    }
  }
  return out.str();
}

Joined join_on_store(KvStore& store, const StoreJoinOptions& o) {
  const auto lost = [&](const std::exception& e) {
    return "lost the rendezvous store of rank 0 at " + o.store_address +
           " while waiting for ranks: " + first_line(e.what());
  };
  // derive_rank_hosts() has checked this rank's own place; Slurm's node names are the hosts.
  const bool derived = o.hosts && static_cast<int>(o.hosts->size()) == o.world_size;
  std::string outcome;
  try {
    check_job(store, o);
    store.set(host_key(o.rank), o.hostname);
    if (!derived) store.add(kUnderived, 1);
    const int64_t arrived = store.add(kArrived, 1);
    if (arrived == o.world_size) {
      // The last to arrive: every rank has counted itself in (and, before that, itself underived).
      store.set(kOutcome, "ok " + std::to_string(store.add(kUnderived, 0)) + " " + new_token());
    } else if (arrived > o.world_size) {
      HPCTRAIN_THROW(rt::PeerError,
                     "rank " + std::to_string(o.rank) + " arrived at the rendezvous at " +
                         o.store_address + " as number " + std::to_string(arrived) + " of " +
                         std::to_string(o.world_size) +
                         " ranks: two ranks have the same RANK (or a rank of this job started "
                         "twice); the job cannot go on");
    }
    // A wait on the store's side: no polling whatever the world size.
    store.set_timeout(o.rank == 0 ? o.timeout : o.timeout + kGrace);
    try {
      outcome = store.get(kOutcome);
    } catch (const std::exception& e) {
      if (o.rank != 0) {
        HPCTRAIN_THROW(
            rt::PeerError,
            "rendezvous timed out after " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()) +
                " s, and rank 0 posted no verdict (" + first_line(e.what()) + ")");
      }
      // Rank 0's deadline: every key is there but not every count (a rank died between the two)
      // means every rank did arrive, as does an outcome posted meanwhile.
      store.set_timeout(o.timeout);
      if (!store.check(kOutcome)) {
        const std::string verdict = timeout_verdict(store, o);
        if (!store.check(kOutcome)) store.set(kOutcome, "failed " + verdict);
      }
      outcome = store.get(kOutcome);
    }
    store.set_timeout(o.timeout);
  } catch (const rt::PeerError&) {
    throw;
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::PeerError, lost(e));
  }
  if (outcome.rfind("failed ", 0) == 0) {
    if (o.rank == 0) std::this_thread::sleep_for(1s);  // serve the verdict a moment
    HPCTRAIN_THROW(rt::PeerError, outcome.substr(7));
  }
  std::istringstream fields(outcome);
  std::string ok;
  int64_t underived = -1;
  Joined joined;
  fields >> ok >> underived >> joined.token;
  if (ok != "ok" || underived < 0 || joined.token.empty()) {
    HPCTRAIN_THROW(rt::PeerError, "the rendezvous store of rank 0 at " + o.store_address +
                                      " holds a garbled outcome: '" + first_line(outcome) + "'");
  }
  if (underived == 0) {
    joined.hosts = o.hosts;
    return joined;
  }
  // Some rank could not derive the hosts: everyone reads them (world_size values, one round trip).
  std::vector<std::string> keys;
  for (int r = 0; r < o.world_size; ++r) keys.push_back(host_key(r));
  try {
    joined.hosts = std::make_shared<const std::vector<std::string>>(store.multi_get(keys));
  } catch (const std::exception& e) {
    HPCTRAIN_THROW(rt::PeerError, lost(e));
  }
  joined.hosts_from_store = true;
  return joined;
}

}  // namespace hpctrain::dist
