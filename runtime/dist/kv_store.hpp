// The key-value store the heartbeat and the hang watchdog talk through (dist/heartbeat.hpp,
// dist/hang_watchdog.hpp): in the worker c10d's TCPStore on rank 0 (dist/c10d_kv_store.hpp), in
// tests an in-memory one. Torch-free, so that the heartbeat's threads build and run under
// ThreadSanitizer without libtorch.
// Semantics are c10d::Store's: get() and multi_get() wait (up to the timeout) for keys that are
// not there yet; any call throws a std::exception when the store cannot be reached or the wait
// ran out, and a call may block up to the timeout (a cut link never throws sooner).
// Thread safety: one object per thread of use (the heartbeat has a connection of its own).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain::dist {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // Adds `delta` to the counter at `key` (made at 0 when missing); its new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  virtual void set(const std::string& key, const std::string& value) = 0;
  virtual std::string get(const std::string& key) = 0;
  // Whether `key` exists, without waiting.
  virtual bool check(const std::string& key) = 0;
  // Every key's value, in order, in one round trip.
  virtual std::vector<std::string> multi_get(const std::vector<std::string>& keys) = 0;
  // How long a call may wait from now on.
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;
};

// A connection made on its first call by `connect` (the heartbeat's members: only a hang
// verdict makes them talk to the store, so rank 0 holds a descriptor per node, not per rank).
// set_timeout() is kept and applied when it connects. Thread safety: as any KvStore.
std::unique_ptr<KvStore> lazy_kv_store(std::function<std::unique_ptr<KvStore>()> connect);

}  // namespace hpctrain::dist
