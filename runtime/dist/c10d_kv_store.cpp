#include "dist/c10d_kv_store.hpp"

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace hpctrain::dist {
namespace {

std::string text(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

class C10dKvStore final : public KvStore {
 public:
  explicit C10dKvStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  int64_t add(const std::string& key, int64_t delta) override { return store_->add(key, delta); }
  void set(const std::string& key, const std::string& value) override {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key) override { return text(store_->get(key)); }
  bool check(const std::string& key) override { return store_->check({key}); }
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    std::vector<std::string> out;
    for (const auto& v : store_->multiGet(keys)) out.push_back(text(v));
    return out;
  }
  void set_timeout(std::chrono::milliseconds timeout) override { store_->setTimeout(timeout); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

std::unique_ptr<KvStore> c10d_kv_store(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_unique<C10dKvStore>(std::move(store));
}

}  // namespace hpctrain::dist
