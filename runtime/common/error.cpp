#include "common/error.hpp"

#include <unistd.h>

#include <cstring>
#include <string>

namespace hpctrain::rt {
namespace {

std::string& context() {
  static std::string prefix;
  return prefix;
}

std::string local_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

void set_rank_context(int rank, int world_size, const std::string& host) {
  context() =
      "[rank " + std::to_string(rank) + "/" + std::to_string(world_size) + " " + host + "] ";
}

std::string rank_prefix() {
  if (context().empty()) return "[" + local_host() + "] ";
  return context();
}

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(rank_prefix() + base_name(file) + ":" + std::to_string(line) + ": " +
                         message) {}

}  // namespace hpctrain::rt
