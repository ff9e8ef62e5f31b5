#include "common/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/unique_fd.hpp"

namespace hpctrain::common {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_errno(const std::string& what, const fs::path& path) {
  throw FileError(what + " " + path.string() + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& content, const fs::path& path) {
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void fsync_dir(const fs::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno("cannot open directory", dir);
  if (::fsync(fd.get()) != 0) fail_errno("cannot fsync directory", dir);
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  const fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp-XXXXXX")).string();
  UniqueFd fd(::mkstemp(tmpl.data()));
  if (fd.get() < 0) fail_errno("cannot create a temporary file in", dir);
  try {
    write_all(fd.get(), content, tmpl);
    if (::fchmod(fd.get(), 0644) != 0 || ::fsync(fd.get()) != 0) fail_errno("cannot sync", tmpl);
    if (::close(fd.release()) != 0) fail_errno("cannot close", tmpl);
    if (::rename(tmpl.c_str(), path.c_str()) != 0) fail_errno("cannot rename onto", path);
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
  fsync_dir(dir);
}

void append_line(const fs::path& path, const std::string& line) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail_errno("cannot open", path);
  write_all(fd.get(), line + "\n", path);
  if (::fsync(fd.get()) != 0) fail_errno("cannot fsync", path);
}

}  // namespace hpctrain::common
