#include "supervisor/step_output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/unique_fd.hpp"

namespace hpctrain::supervisor {

void StepOutput::mark() {
  struct stat st {};
  if (::fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) {
    offset_.reset();
    return;
  }
  offset_ = static_cast<int64_t>(st.st_size);
}

std::vector<std::string> StepOutput::lines(size_t max_bytes) const {
  std::vector<std::string> out;
  if (!offset_) return out;
  // fd 2 is open for writing only: the file is opened again, for reading.
  UniqueFd fd(::open("/proc/self/fd/2", O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_size <= *offset_) return out;
  const int64_t end = st.st_size;
  const int64_t from = std::max(*offset_, end - static_cast<int64_t>(max_bytes));
  std::string text(static_cast<size_t>(end - from), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::pread(fd.get(), text.data() + done, text.size() - done,
                              static_cast<off_t>(from + static_cast<int64_t>(done)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  size_t start = 0;
  if (from > *offset_) {
    // Cut in the middle of a line: it starts after the first newline.
    start = text.find('\n');
    start = start == std::string::npos ? text.size() : start + 1;
  }
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string::npos) break;  // a line still being written
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace hpctrain::supervisor
