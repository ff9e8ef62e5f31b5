// Test Envs for the checkpoint store, as leveldb's memenv and FaultInjectionTestEnv:
//  - MemEnv: an in-memory filesystem that remembers what was made durable (a file's content as
//    of its last fsync, a directory's entries as of its last fsync) and, on crash(), forgets the
//    rest, as a power loss may under POSIX: nothing is durable that was not fsynced.
//  - FaultEnv: wraps another Env, numbers every operation (WritableFile's included) and fails
//    the one chosen (an injected error), or it and every later one (a crash).
// Thread safety: MemEnv locks itself (ranks as threads may share it); FaultEnv is for one
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/env.hpp"

namespace hpctrain::checkpoint::test {

class MemEnv final : public Env {
 public:
  MemEnv();

  bool create_dir(const std::string& path, uint32_t mode) override;
  std::unique_ptr<WritableFile> new_file(const std::string& path, uint32_t mode) override;
  void sync_dir(const std::string& path) override;
  void rename(const std::string& from, const std::string& to) override;
  std::string read_file(const std::string& path, int64_t max_bytes) override;
  std::vector<std::string> list_dir(const std::string& path) override;
  void remove_file(const std::string& path) override;
  void remove_all(const std::string& path) override;
  std::optional<FileStat> stat(const std::string& path, bool follow) override;
  int64_t fs_type(const std::string& path) override;

  // Forgets everything not made durable.
  void crash();
  // Test hooks.
  void set_fs_type(int64_t type) { fs_type_ = type; }
  void set_owner(const std::string& path, uint32_t uid, uint32_t mode);
  // Replaces a file's content (durably), as a disk error or a careless user would.
  void overwrite(const std::string& path, const std::string& data);

  struct Node;

 private:
  std::shared_ptr<Node> find(const std::string& path);
  // The directory that holds `path` and the last component of it.
  std::pair<std::shared_ptr<Node>, std::string> parent_of(const std::string& what,
                                                          const std::string& path);

  std::mutex mu_;
  std::shared_ptr<Node> root_;
  int64_t fs_type_ = 0xEF53;  // ext4
};

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(Env& base) : base_(base) {}

  bool create_dir(const std::string& path, uint32_t mode) override;
  std::unique_ptr<WritableFile> new_file(const std::string& path, uint32_t mode) override;
  void sync_dir(const std::string& path) override;
  void rename(const std::string& from, const std::string& to) override;
  std::string read_file(const std::string& path, int64_t max_bytes) override;
  std::vector<std::string> list_dir(const std::string& path) override;
  void remove_file(const std::string& path) override;
  void remove_all(const std::string& path) override;
  std::optional<FileStat> stat(const std::string& path, bool follow) override;
  int64_t fs_type(const std::string& path) override;

  // Operation number `index` (counted from the last reset()) fails with `err`.
  void fail_at(int64_t index, int err);
  // Operation `index` and every later one fail, as if the process died there.
  void crash_at(int64_t index);
  // Counts from 0 again, without faults.
  void reset();
  int64_t operations() const { return next_; }
  // "fsync /ckpt/.step-000000002.tmp/a.bin" for each operation since reset().
  const std::vector<std::string>& log() const { return log_; }
  // The message of the injected error, once it fired.
  const std::string& injected() const { return injected_; }

  // Called with each operation before it runs (to hold a background write at a gate, say).
  void set_hook(std::function<void(const std::string& what)> hook) { hook_ = std::move(hook); }

  // Counts the operation `what` and throws if it is to fail; WritableFile's wrapper uses it too.
  void check(const std::string& what);

 private:
  Env& base_;
  int64_t next_ = 0;
  std::optional<int64_t> fail_index_, crash_index_;
  int fail_errno_ = 0;
  std::vector<std::string> log_;
  std::string injected_;
  std::function<void(const std::string&)> hook_;
};

}  // namespace hpctrain::checkpoint::test
