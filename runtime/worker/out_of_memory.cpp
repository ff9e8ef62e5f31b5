#include "worker/out_of_memory.hpp"

#include <sys/resource.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/size_text.hpp"

namespace hpctrain::worker {

namespace {

// The number right after `key` in `text` (digits and one point), or nullopt.
std::optional<double> number_after(std::string_view text, std::string_view key, size_t* end) {
  const auto at = text.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  size_t i = at + key.size(), j = i;
  while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.')) {
    ++j;
  }
  if (j == i) return std::nullopt;
  *end = j;
  return std::strtod(std::string(text.substr(i, j - i)).c_str(), nullptr);
}

}  // namespace

bool is_device_out_of_memory(std::string_view what) {
  return what.find("CUDA out of memory") != std::string_view::npos ||
         what.find("CUDA error: out of memory") != std::string_view::npos;
}

bool is_out_of_memory(std::string_view what) {
  return what.find("DefaultCPUAllocator: can't allocate memory") != std::string_view::npos ||
         is_device_out_of_memory(what);
}

std::optional<uint64_t> failed_allocation_bytes(std::string_view what) {
  size_t end = 0;
  if (auto n = number_after(what, "you tried to allocate ", &end)) {
    return static_cast<uint64_t>(*n);
  }
  if (auto n = number_after(what, "Tried to allocate ", &end)) {
    const std::string_view unit = what.substr(end + 1, 3);
    double scale = 1;
    if (unit == "KiB") scale = 1024.0;
    if (unit == "MiB") scale = 1024.0 * 1024;
    if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
    if (unit == "TiB") scale = 1024.0 * 1024 * 1024 * 1024;
    return static_cast<uint64_t>(std::llround(*n * scale));
  }
  return std::nullopt;
}

MemoryFigures memory_figures() {
  MemoryFigures m;
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    m.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    m.address_space_limit = limit.rlim_cur;
  }
  return m;
}

std::string out_of_memory_text(bool device, std::optional<uint64_t> failed,
                               const MemoryFigures& figures) {
  std::string out = device ? "device memory ran out" : "host memory ran out";
  if (failed) out += ": an allocation of " + common::size_text(*failed) + " failed";
  out += "; peak RSS of this rank " + common::size_text(figures.peak_rss_bytes);
  if (figures.address_space_limit) {
    out += "; address space limited to " + common::size_text(*figures.address_space_limit) +
           " (ulimit -v)";
  }
  return out;
}

}  // namespace hpctrain::worker
