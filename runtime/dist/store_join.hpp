// Joining on rank 0's store (dist/process_group.hpp's start-up, after the connection is made):
// every rank counts itself in and waits until all have, then knows every rank's host. Torch-free
// over dist/kv_store.hpp, so the same code runs in the worker (c10d's TCPStore) and in the
// many-rank emulator (bench/scale/emulate.cpp). docs/scaling.md, "rendezvous" and "host list".
// Thread safety: one call per store connection.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/kv_store.hpp"

namespace hpctrain::dist {

struct StoreJoinOptions {
  int rank = 0;
  int world_size = 1;
  std::string hostname;       // this rank's, for the others' messages
  std::string store_address;  // "host:port", for the messages
  std::chrono::milliseconds timeout{600000};
  // Which job this rank belongs to, the same on every rank of one job and different between jobs
  // that may share a machine ("Slurm job 12 step 0", "run directory /scratch/run7"). Rank 0 posts
  // it (with the world size) before anything else; every other rank reads it before writing
  // anything, and refuses a store that serves another job. Empty: not checked.
  std::string job;
  // Every rank's host as this rank derived it (derive_rank_hosts(), world.hpp); empty: not
  // derivable here (null). Used when every rank derived them; else every rank reads them from the
  // store. Shared: the many-rank emulator's ranks are threads of one process.
  std::shared_ptr<const std::vector<std::string>> hosts;
};

struct Joined {
  std::shared_ptr<const std::vector<std::string>> hosts;  // every rank's
  bool hosts_from_store = false;  // some rank could not derive them: read from the store
  std::string token;              // the same on every rank, new for every join (dist/node_board)
};

// Checks that the store serves this rank's job (StoreJoinOptions::job), sets this rank's host key
// (read only to name a rank, or when the hosts are not derivable), counts itself in, and waits for
// the last rank to arrive, which posts the outcome: a fixed number of store operations per rank,
// whatever the world size; nobody polls. When the deadline passes first, rank 0 names the ranks
// that never arrived and posts that instead; every rank then throws it as rt::PeerError. Throws
// rt::PeerError when the store is lost meanwhile, when it serves another job (a rank whose own
// rank 0 could not listen reached the job that holds the port: it writes nothing there), and when
// more ranks arrive than the world size (two ranks with one RANK).
Joined join_on_store(KvStore& store, const StoreJoinOptions& o);

// "3, 5 (node7)": ranks, each with its host where `hosts` knows it.
std::string list_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts);

}  // namespace hpctrain::dist
