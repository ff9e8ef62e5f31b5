#include "mem_env.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace hpctrain::checkpoint::test {

struct MemEnv::Node {
  bool dir = false;
  uint32_t mode = 0, uid = 0;
  std::string data, synced_data;                                         // files
  std::map<std::string, std::shared_ptr<Node>> entries, synced_entries;  // directories
};

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  HPCTRAIN_THROW(rt::Error, what + " " + path + ": " + std::strerror(err));
}

std::vector<std::string> components(const std::string& path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t slash = path.find('/', at);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    if (end > at) parts.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

class MemFile final : public WritableFile {
 public:
  MemFile(std::mutex& mu, std::shared_ptr<MemEnv::Node> node) : mu_(mu), node_(std::move(node)) {}
  void append(std::string_view data) override {
    std::lock_guard<std::mutex> lock(mu_);
    node_->data.append(data);
  }
  void sync() override {
    std::lock_guard<std::mutex> lock(mu_);
    node_->synced_data = node_->data;
  }
  void close() override {}

 private:
  std::mutex& mu_;
  std::shared_ptr<MemEnv::Node> node_;
};

}  // namespace

MemEnv::MemEnv() : root_(std::make_shared<Node>()) {
  root_->dir = true;
  root_->mode = 0755;
  root_->uid = ::geteuid();
}

std::shared_ptr<MemEnv::Node> MemEnv::find(const std::string& path) {
  std::shared_ptr<Node> node = root_;
  for (const auto& part : components(path)) {
    if (!node->dir) return nullptr;
    const auto it = node->entries.find(part);
    if (it == node->entries.end()) return nullptr;
    node = it->second;
  }
  return node;
}

std::pair<std::shared_ptr<MemEnv::Node>, std::string> MemEnv::parent_of(const std::string& what,
                                                                        const std::string& path) {
  auto parts = components(path);
  if (parts.empty()) fail(what, path, EINVAL);
  const std::string name = parts.back();
  parts.pop_back();
  std::string parent_path;
  for (const auto& p : parts) parent_path += "/" + p;
  auto parent = find(parent_path);
  if (!parent) fail(what, path, ENOENT);
  if (!parent->dir) fail(what, path, ENOTDIR);
  return {parent, name};
}

bool MemEnv::create_dir(const std::string& path, uint32_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [parent, name] = parent_of("create directory", path);
  if (parent->entries.count(name)) return false;
  auto node = std::make_shared<Node>();
  node->dir = true;
  node->mode = mode;
  node->uid = ::geteuid();
  parent->entries[name] = node;
  return true;
}

std::unique_ptr<WritableFile> MemEnv::new_file(const std::string& path, uint32_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [parent, name] = parent_of("create", path);
  if (parent->entries.count(name)) fail("create", path, EEXIST);
  auto node = std::make_shared<Node>();
  node->mode = mode;
  node->uid = ::geteuid();
  parent->entries[name] = node;
  return std::make_unique<MemFile>(mu_, node);
}

void MemEnv::sync_dir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto node = find(path);
  if (!node) fail("open directory", path, ENOENT);
  if (!node->dir) fail("open directory", path, ENOTDIR);
  node->synced_entries = node->entries;
}

void MemEnv::rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [from_parent, from_name] = parent_of("rename " + from + " to", from);
  auto [to_parent, to_name] = parent_of("rename " + from + " to", to);
  const auto it = from_parent->entries.find(from_name);
  if (it == from_parent->entries.end()) fail("rename " + from + " to", to, ENOENT);
  if (to_parent->entries.count(to_name)) fail("rename " + from + " to", to, EEXIST);
  auto node = it->second;
  from_parent->entries.erase(it);
  to_parent->entries[to_name] = node;
}

std::string MemEnv::read_file(const std::string& path, int64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto node = find(path);
  if (!node) fail("open", path, ENOENT);
  if (node->dir) fail("read", path, EISDIR);
  if (static_cast<int64_t>(node->data.size()) > max_bytes) fail("read", path, EFBIG);
  return node->data;
}

std::vector<std::string> MemEnv::list_dir(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto node = find(path);
  if (!node) fail("list", path, ENOENT);
  if (!node->dir) fail("list", path, ENOTDIR);
  std::vector<std::string> names;
  for (const auto& entry : node->entries) names.push_back(entry.first);
  return names;
}

void MemEnv::remove_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [parent, name] = parent_of("remove", path);
  const auto it = parent->entries.find(name);
  if (it == parent->entries.end()) fail("remove", path, ENOENT);
  if (it->second->dir) fail("remove", path, EISDIR);
  parent->entries.erase(it);
}

void MemEnv::remove_all(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [parent, name] = parent_of("remove", path);
  // The node stays as it was for whatever still refers to it (an entry not yet durably gone).
  parent->entries.erase(name);
}

std::optional<FileStat> MemEnv::stat(const std::string& path, bool /*follow: no symlinks here*/) {
  std::lock_guard<std::mutex> lock(mu_);
  auto node = find(path);
  if (!node) return std::nullopt;
  FileStat s;
  s.kind = node->dir ? FileStat::Kind::kDir : FileStat::Kind::kFile;
  s.mode = node->mode;
  s.uid = node->uid;
  s.size = static_cast<int64_t>(node->data.size());
  return s;
}

int64_t MemEnv::fs_type(const std::string& /*path*/) { return fs_type_; }

void MemEnv::crash() {
  std::lock_guard<std::mutex> lock(mu_);
  std::function<void(Node&)> forget = [&](Node& node) {
    if (!node.dir) {
      node.data = node.synced_data;
      return;
    }
    node.entries = node.synced_entries;
    for (auto& entry : node.entries) forget(*entry.second);
  };
  forget(*root_);
}

void MemEnv::set_owner(const std::string& path, uint32_t uid, uint32_t mode) {
  std::lock_guard<std::mutex> lock(mu_);
  auto node = find(path);
  if (!node) fail("chown", path, ENOENT);
  node->uid = uid;
  node->mode = mode;
}

void MemEnv::overwrite(const std::string& path, const std::string& data) {
  std::lock_guard<std::mutex> lock(mu_);
  auto node = find(path);
  if (!node || node->dir) fail("overwrite", path, ENOENT);
  node->data = node->synced_data = data;
}

// FaultEnv

namespace {

class FaultFile final : public WritableFile {
 public:
  FaultFile(FaultEnv& env, std::string path, std::unique_ptr<WritableFile> base)
      : env_(env), path_(std::move(path)), base_(std::move(base)) {}
  void append(std::string_view data) override {
    env_.check("write " + path_);
    base_->append(data);
  }
  void sync() override {
    env_.check("fsync " + path_);
    base_->sync();
  }
  void close() override {
    env_.check("close " + path_);
    base_->close();
  }

 private:
  FaultEnv& env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

}  // namespace

void FaultEnv::check(const std::string& what) {
  if (hook_) hook_(what);
  const int64_t index = next_++;
  log_.push_back(what);
  if (crash_index_ && index >= *crash_index_) {
    HPCTRAIN_THROW(rt::Error, what + ": the process is gone (simulated crash)");
  }
  if (fail_index_ && index == *fail_index_) {
    injected_ = what + ": " + std::strerror(fail_errno_) + " (injected)";
    HPCTRAIN_THROW(rt::Error, injected_);
  }
}

void FaultEnv::fail_at(int64_t index, int err) {
  fail_index_ = index;
  fail_errno_ = err;
}
void FaultEnv::crash_at(int64_t index) { crash_index_ = index; }
void FaultEnv::reset() {
  next_ = 0;
  fail_index_.reset();
  crash_index_.reset();
  log_.clear();
  injected_.clear();
}

bool FaultEnv::create_dir(const std::string& path, uint32_t mode) {
  check("create directory " + path);
  return base_.create_dir(path, mode);
}
std::unique_ptr<WritableFile> FaultEnv::new_file(const std::string& path, uint32_t mode) {
  check("create " + path);
  return std::make_unique<FaultFile>(*this, path, base_.new_file(path, mode));
}
void FaultEnv::sync_dir(const std::string& path) {
  check("fsync directory " + path);
  base_.sync_dir(path);
}
void FaultEnv::rename(const std::string& from, const std::string& to) {
  check("rename " + from + " to " + to);
  base_.rename(from, to);
}
std::string FaultEnv::read_file(const std::string& path, int64_t max_bytes) {
  check("read " + path);
  return base_.read_file(path, max_bytes);
}
std::vector<std::string> FaultEnv::list_dir(const std::string& path) {
  check("list " + path);
  return base_.list_dir(path);
}
void FaultEnv::remove_file(const std::string& path) {
  check("remove " + path);
  base_.remove_file(path);
}
void FaultEnv::remove_all(const std::string& path) {
  check("remove all " + path);
  base_.remove_all(path);
}
std::optional<FileStat> FaultEnv::stat(const std::string& path, bool follow) {
  check("stat " + path);
  return base_.stat(path, follow);
}
int64_t FaultEnv::fs_type(const std::string& path) {
  check("statfs " + path);
  return base_.fs_type(path);
}

}  // namespace hpctrain::checkpoint::test
