#include "dist/kv_store.hpp"

#include <optional>

namespace hpctrain::dist {
namespace {

class LazyKvStore final : public KvStore {
 public:
  explicit LazyKvStore(std::function<std::unique_ptr<KvStore>()> connect)
      : connect_(std::move(connect)) {}

  int64_t add(const std::string& key, int64_t delta) override { return store().add(key, delta); }
  void set(const std::string& key, const std::string& value) override { store().set(key, value); }
  std::string get(const std::string& key) override { return store().get(key); }
  bool check(const std::string& key) override { return store().check(key); }
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    return store().multi_get(keys);
  }
  void set_timeout(std::chrono::milliseconds timeout) override {
    timeout_ = timeout;
    if (store_) store_->set_timeout(timeout);
  }

 private:
  KvStore& store() {
    if (!store_) {
      store_ = connect_();
      if (timeout_) store_->set_timeout(*timeout_);
    }
    return *store_;
  }

  std::function<std::unique_ptr<KvStore>()> connect_;
  std::unique_ptr<KvStore> store_;
  std::optional<std::chrono::milliseconds> timeout_;
};

}  // namespace

std::unique_ptr<KvStore> lazy_kv_store(std::function<std::unique_ptr<KvStore>()> connect) {
  return std::make_unique<LazyKvStore>(std::move(connect));
}

}  // namespace hpctrain::dist
