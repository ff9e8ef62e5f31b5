// Joining on rank 0's store (dist/process_group.hpp's start-up, after the connection is made):
// every rank counts itself in and waits until all have, then learns every rank's host. Torch-free
// over dist/kv_store.hpp, so the same code runs in the worker (c10d's TCPStore) and in the
// many-rank emulator (bench/scale/emulate.cpp).
// Thread safety: one call per store connection.
#pragma once

#include <chrono>
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
  std::chrono::milliseconds poll{100};
};

// Sets this rank's host key, counts itself in and waits (polling the count, one round trip a
// poll) until every rank has; at the deadline rank 0 names the ranks that never arrived and posts
// that verdict, which every rank then throws as rt::PeerError. Returns every rank's host.
// Throws rt::PeerError when the store is lost meanwhile.
std::vector<std::string> join_on_store(KvStore& store, const StoreJoinOptions& o);

// "3, 5 (node7)": ranks, each with its host where `hosts` knows it.
std::string list_ranks(const std::vector<int>& ranks, const std::vector<std::string>& hosts);

}  // namespace hpctrain::dist
