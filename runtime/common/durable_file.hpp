// Durable writes that survive a crash or power loss at any point: a file replaced atomically, a
// line appended, a directory's entries made durable. Shared by the launcher (run directory,
// rendered scripts) and the runtime (model.pt). Thread safety: reentrant.
#pragma once

#include <filesystem>
#include <string>

#include "common/error.hpp"

namespace hpctrain::common {

// The operation, the path and the OS's text ("cannot rename onto /x/y: No space left on device"),
// without rt::Error's "[rank] file:line: " prefix: the launcher wraps it in its own errors and the
// runtime's callers in theirs.
class FileError : public hpctrain::Error {
 public:
  using hpctrain::Error::Error;
};

// Writes `content` to `path` via a temporary file in the same directory, fsynced and renamed, then
// fsyncs the directory: readers see the old file or the new one, never a torn one.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

// Appends one line (a JSON object) with O_APPEND and fsync.
void append_line(const std::filesystem::path& path, const std::string& line);

// fsync of a directory: the entries created or renamed in it are durable.
void fsync_dir(const std::filesystem::path& dir);

}  // namespace hpctrain::common
