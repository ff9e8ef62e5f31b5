// Env: the filesystem seam of the checkpoint store, as leveldb's Env. Every file operation the
// store does goes through it, so tests can inject an error at any one operation or simulate a
// crash that loses whatever was not fsynced (tests/unit/checkpoint/mem_env.hpp). default_env() is
// POSIX: files are created O_CREAT | O_EXCL | O_NOFOLLOW, nothing is ever opened through a
// symlink, and every error names the operation, the path and the OS's text.
//
// It uses POSIX calls (openat, fdopendir, unlinkat) rather than std::filesystem on purpose: the
// store is linked into the worker next to libtorch, whose wheel exports an older libstdc++'s
// std::filesystem (runtime/CMakeLists.txt).
// Thread safety: default_env() is stateless and may be used from any thread; a WritableFile
// belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::checkpoint {

// What stat() reports: enough to check a checkpoint directory's owner and permissions and a
// file's size without reading it.
struct FileStat {
  enum class Kind { kFile, kDir, kSymlink, kOther };
  Kind kind = Kind::kOther;
  uint32_t mode = 0;  // permission bits (07777)
  uint32_t uid = 0;
  int64_t size = 0;
};

// A file being written. Nothing is durable until sync(); close() reports the errors some
// filesystems (NFS, Lustre) only report there. Destroying an open file closes it quietly.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual void append(std::string_view data) = 0;
  virtual void sync() = 0;
  virtual void close() = 0;
};

// Every method throws rt::Error naming the operation, the path and the reason on failure.
class Env {
 public:
  virtual ~Env() = default;

  // Creates directory `path` with `mode` (narrowed by the umask). Returns false when something
  // of that name exists already (the caller stat()s it).
  virtual bool create_dir(const std::string& path, uint32_t mode) = 0;
  // Creates `path` with `mode`: O_CREAT | O_EXCL | O_NOFOLLOW, so an existing file or a symlink
  // of that name is an error and never overwritten.
  virtual std::unique_ptr<WritableFile> new_file(const std::string& path, uint32_t mode) = 0;
  // fsync of a directory: makes the entries created, renamed or removed in it durable.
  virtual void sync_dir(const std::string& path) = 0;
  // Renames `from` to `to`; fails when `to` exists (RENAME_NOREPLACE where the filesystem has it,
  // checked just before otherwise), so nothing is replaced in place.
  virtual void rename(const std::string& from, const std::string& to) = 0;
  // The whole file (O_NOFOLLOW: a symlink is an error); more than `max_bytes` is an error.
  virtual std::string read_file(const std::string& path, int64_t max_bytes) = 0;
  // The names in a directory, without "." and "..", in no particular order.
  virtual std::vector<std::string> list_dir(const std::string& path) = 0;
  virtual void remove_file(const std::string& path) = 0;
  // Removes `path` and, if it is a directory, everything below it, never following a symlink.
  // Nothing of that name is not an error.
  virtual void remove_all(const std::string& path) = 0;
  // lstat (follow = false) or stat; nullopt when nothing of that name exists.
  virtual std::optional<FileStat> stat(const std::string& path, bool follow) = 0;
  // statfs's f_type of the filesystem holding `path` (LUSTRE_SUPER_MAGIC on Lustre).
  virtual int64_t fs_type(const std::string& path) = 0;
};

// The POSIX filesystem.
Env& default_env();

// "DIR/NAME" (DIR may or may not end in '/').
std::string join_path(std::string_view dir, std::string_view name);

}  // namespace hpctrain::checkpoint
