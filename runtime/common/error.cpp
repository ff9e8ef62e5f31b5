#include "common/error.hpp"

#include <cstring>
#include <string>

#include "common/host.hpp"

namespace hpctrain::rt {
namespace {

std::string& context() {
  static std::string prefix;
  return prefix;
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
  if (context().empty()) return "[" + host_name() + "] ";
  return context();
}

Error::Error(const std::string& message, const char* file, int line)
    : hpctrain::Error(rank_prefix() + base_name(file) + ":" + std::to_string(line) + ": " +
                      message),
      message_(message) {}

}  // namespace hpctrain::rt
