#include "common/host.hpp"

#include <unistd.h>

namespace hpctrain {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace hpctrain
