#include "dist/nccl_environment.hpp"

#include <algorithm>
#include <cstdint>

namespace hpctrain::dist {

std::vector<std::pair<std::string, std::string>> nccl_environment(
    std::chrono::milliseconds collective_deadline, const EnvMap& env) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2");
  auto user = env.find("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC");
  if (user == env.end() || user->second.empty()) {
    // c10d's default monitor timeout is 480 s.
    const int64_t monitor_s = std::max<int64_t>(
        480, std::chrono::duration_cast<std::chrono::seconds>(collective_deadline).count() + 120);
    out.emplace_back("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", std::to_string(monitor_s));
  }
  return out;
}

}  // namespace hpctrain::dist
