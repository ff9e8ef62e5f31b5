// A byte count as people read it: "512 bytes", "392.0 MiB", "3.0 GiB" (powers of 1024).
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

namespace hpctrain::common {

inline std::string size_text(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char out[32];
  std::snprintf(out, sizeof out, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return out;
}

}  // namespace hpctrain::common
