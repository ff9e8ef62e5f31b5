#include "train/metrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.hpp"
#include "common/run_layout.hpp"
#include "common/time.hpp"

namespace hpctrain::train {

MetricsLog::MetricsLog(const std::filesystem::path& path)
    : path_(path), fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) {
  if (!fd_.valid()) {
    HPCTRAIN_THROW(rt::Error, "cannot open " + path.string() + ": " + std::strerror(errno));
  }
}

void MetricsLog::write(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      HPCTRAIN_THROW(rt::Error, "cannot write " + path_.string() + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

void write_suspects(const std::filesystem::path& run_dir, const std::string& kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message) {
  std::vector<std::string> nodes;
  for (const int r : ranks) {
    if (r < 0 || static_cast<size_t>(r) >= hosts.size() || hosts[r].empty()) continue;
    if (std::find(nodes.begin(), nodes.end(), hosts[r]) == nodes.end()) nodes.push_back(hosts[r]);
  }
  MetricsLog(run_dir / layout::kMetrics)
      .write({{"kind", kind},
              {"tag", step_tag},
              {"step", step},
              {"ranks", ranks},
              {"hosts", nodes},
              {"message", message},
              {"wall_time", unix_time()}});
}

}  // namespace hpctrain::train
