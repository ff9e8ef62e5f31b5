// RUN_DIR/metrics.jsonl (docs/metrics-format.md): one JSON object a line, written by rank 0,
// appended across requeues. Each record goes out in one write(2) of a whole line, so a reader
// (hpctrain status) never sees half a record from a live run, and a crash loses at most the
// line being written.
// Thread safety: one writer thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace hpctrain::train {

class MetricsLog {
 public:
  // Opens (creating) `path` for appending; throws rt::Error naming it.
  explicit MetricsLog(const std::filesystem::path& path);
  // Appends `record` as one line.
  void write(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  UniqueFd fd_;
};

// Appends a {"kind": KIND, "tag", "step", "ranks", "hosts", "message", "wall_time"} record to
// RUN_DIR/metrics.jsonl: ranks that the step supervisor is to treat as lost, with their nodes
// ("hang": named by the hang watchdog; "evict": a straggler's node let go). Throws rt::Error.
void write_suspects(const std::filesystem::path& run_dir, const std::string& kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message);

}  // namespace hpctrain::train
