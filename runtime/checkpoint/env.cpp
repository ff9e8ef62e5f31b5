#include "checkpoint/env.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.hpp"
#include "common/unique_fd.hpp"

namespace hpctrain::checkpoint {
namespace {

// "what path: reason", with a hint where the OS's text alone misleads.
[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  std::string message = what + " " + path + ": " + std::strerror(err);
  if (err == ELOOP) message += " (it is a symlink; checkpoint files are never read through one)";
  HPCTRAIN_THROW(rt::Error, message);
}

// One write(2) is capped near 2 GiB on Linux; larger checkpoint files are written in pieces.
constexpr size_t kMaxWrite = size_t{1} << 30;
// Start writing back every this many bytes instead of leaving it all to fsync (RocksDB's
// bytes_per_sync): the device works while the rest is still being copied and hashed, and dirty
// pages do not pile up in a training node's memory.
constexpr off_t kWritebackEvery = off_t{8} << 20;

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

  void append(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::write(fd_.get(), data.data(), std::min(data.size(), kMaxWrite));
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
      written_ += n;
    }
    if (written_ - flushed_ >= kWritebackEvery) {
      // Only a hint: SYNC_FILE_RANGE_WRITE starts writeback and waits for nothing; fsync()
      // still makes the file durable, so a filesystem that refuses it loses only the overlap.
      ::sync_file_range(fd_.get(), flushed_, written_ - flushed_, SYNC_FILE_RANGE_WRITE);
      flushed_ = written_;
    }
  }
  void sync() override {
    if (::fsync(fd_.get()) != 0) fail("fsync", path_, errno);
  }
  void close() override {
    // Not retried on EINTR: Linux closes the descriptor whatever close() returns.
    if (::close(fd_.release()) != 0) fail("close", path_, errno);
  }

 private:
  std::string path_;
  UniqueFd fd_;
  off_t written_ = 0, flushed_ = 0;
};

// The names in an open directory, without "." and "..". Does not close it.
std::vector<std::string> names_in(DIR* dir, const std::string& shown) {
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(dir)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  if (errno != 0) fail("list", shown, errno);
  return names;
}

using DirHandle = std::unique_ptr<DIR, int (*)(DIR*)>;

// Removes entry `name` of the directory open as `parent` (AT_FDCWD: a path) and, for a
// directory, everything below it. Descends through descriptors opened O_NOFOLLOW, so a symlink
// is removed itself, never what it points to.
void remove_at(int parent, const std::string& name, const std::string& shown) {
  if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) fail("remove", shown, errno);
  const int first_error = errno;
  UniqueFd dir_fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd.valid()) fail("remove", shown, errno == ENOTDIR ? first_error : errno);
  DirHandle dir(::fdopendir(dir_fd.get()), ::closedir);
  if (!dir) fail("open directory", shown, errno);
  const int fd = dir_fd.release();  // owned by `dir` now
  for (const auto& n : names_in(dir.get(), shown)) remove_at(fd, n, shown + "/" + n);
  dir.reset();
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    fail("remove directory", shown, errno);
  }
}

class PosixEnv final : public Env {
 public:
  bool create_dir(const std::string& path, uint32_t mode) override {
    if (::mkdir(path.c_str(), mode) == 0) return true;
    if (errno == EEXIST) return false;
    fail("create directory", path, errno);
  }

  std::unique_ptr<WritableFile> new_file(const std::string& path, uint32_t mode) override {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
    if (!fd.valid()) fail("create", path, errno);
    return std::make_unique<PosixWritableFile>(path, std::move(fd));
  }

  void sync_dir(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) fail("open directory", path, errno);
    if (::fsync(fd.get()) != 0) fail("fsync directory", path, errno);
  }

  void rename(const std::string& from, const std::string& to) override {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
    // Filesystems without RENAME_NOREPLACE say EINVAL; check by hand there (only this process
    // writes into a checkpoint directory, so the window does not matter).
    if (errno != EINVAL && errno != ENOSYS) fail("rename " + from + " to", to, errno);
    struct stat st;
    if (::lstat(to.c_str(), &st) == 0) fail("rename " + from + " to", to, EEXIST);
    if (::rename(from.c_str(), to.c_str()) != 0) fail("rename " + from + " to", to, errno);
  }

  std::string read_file(const std::string& path, int64_t max_bytes) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) fail("open", path, errno);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) fail("stat", path, errno);
    if (!S_ISREG(st.st_mode)) HPCTRAIN_THROW(rt::Error, "read " + path + ": not a regular file");
    if (st.st_size > max_bytes) {
      HPCTRAIN_THROW(rt::Error, "read " + path + ": " + std::to_string(st.st_size) +
                                    " bytes, more than the " + std::to_string(max_bytes) +
                                    " expected");
    }
    std::string data(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t n = ::read(fd.get(), data.data() + got, std::min(data.size() - got, kMaxWrite));
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("read", path, errno);
      }
      if (n == 0) break;  // shrank while being read: the caller's size check reports it
      got += static_cast<size_t>(n);
    }
    data.resize(got);
    return data;
  }

  std::vector<std::string> list_dir(const std::string& path) override {
    DirHandle dir(::opendir(path.c_str()), ::closedir);
    if (!dir) fail("list", path, errno);
    return names_in(dir.get(), path);
  }

  void remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) fail("remove", path, errno);
  }

  void remove_all(const std::string& path) override { remove_at(AT_FDCWD, path, path); }

  std::optional<FileStat> stat(const std::string& path, bool follow) override {
    struct stat st;
    if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
      if (errno == ENOENT) return std::nullopt;
      fail("stat", path, errno);
    }
    FileStat s;
    s.kind = S_ISREG(st.st_mode)   ? FileStat::Kind::kFile
             : S_ISDIR(st.st_mode) ? FileStat::Kind::kDir
             : S_ISLNK(st.st_mode) ? FileStat::Kind::kSymlink
                                   : FileStat::Kind::kOther;
    s.mode = st.st_mode & 07777;
    s.uid = st.st_uid;
    s.size = st.st_size;
    return s;
  }

  int64_t fs_type(const std::string& path) override {
    struct statfs st;
    if (::statfs(path.c_str(), &st) != 0) fail("statfs", path, errno);
    return static_cast<int64_t>(st.f_type);
  }
};

}  // namespace

Env& default_env() {
  static PosixEnv env;
  return env;
}

std::string join_path(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty() && path.back() != '/') path += '/';
  path += name;
  return path;
}

}  // namespace hpctrain::checkpoint
