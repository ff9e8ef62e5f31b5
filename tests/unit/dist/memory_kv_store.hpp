// An in-memory dist::KvStore shared by the "ranks" (threads) of one test process, with
// c10d::Store's semantics (dist/kv_store.hpp): get() and multi_get() wait up to the connection's
// timeout for a key, then throw. freeze() makes every call block until thaw(), as a cut link
// does: the call neither answers nor throws.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "dist/kv_store.hpp"

namespace hpctrain::dist {

class MemoryKvStore {
 public:
  MemoryKvStore() : shared_(std::make_shared<Shared>()) {}

  // A connection of its own (c10d's Store::clone()), with its own timeout.
  std::unique_ptr<KvStore> connection() const { return std::make_unique<Connection>(shared_); }

  void freeze() { shared_->set_frozen(true); }
  void thaw() { shared_->set_frozen(false); }

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<std::string, std::string> data;  // guarded by mutex
    bool frozen = false;                      // guarded by mutex

    void set_frozen(bool f) {
      std::lock_guard<std::mutex> lock(mutex);
      frozen = f;
      changed.notify_all();
    }
    // The lock, once the store answers.
    std::unique_lock<std::mutex> answer() {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return !frozen; });
      return lock;
    }
  };

  class Connection final : public KvStore {
   public:
    explicit Connection(std::shared_ptr<Shared> shared) : s_(std::move(shared)) {}

    int64_t add(const std::string& key, int64_t delta) override {
      auto lock = s_->answer();
      auto& v = s_->data[key];
      const int64_t now = (v.empty() ? 0 : std::stoll(v)) + delta;
      v = std::to_string(now);
      s_->changed.notify_all();
      return now;
    }
    void set(const std::string& key, const std::string& value) override {
      auto lock = s_->answer();
      s_->data[key] = value;
      s_->changed.notify_all();
    }
    std::string get(const std::string& key) override { return multi_get({key}).front(); }
    bool check(const std::string& key) override {
      auto lock = s_->answer();
      return s_->data.count(key) > 0;
    }
    std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
      auto lock = s_->answer();
      const auto all_there = [&] {
        for (const auto& k : keys) {
          if (!s_->data.count(k)) return false;
        }
        return true;
      };
      if (!s_->changed.wait_for(lock, timeout_, all_there)) {
        throw std::runtime_error("memory store: timed out waiting for " + keys.front());
      }
      std::vector<std::string> out;
      for (const auto& k : keys) out.push_back(s_->data.at(k));
      return out;
    }
    void set_timeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

   private:
    std::shared_ptr<Shared> s_;
    std::chrono::milliseconds timeout_{5000};
  };

  std::shared_ptr<Shared> shared_;
};

}  // namespace hpctrain::dist
