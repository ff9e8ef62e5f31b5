// RUN_DIR/metrics.jsonl (docs/metrics-format.md): one JSON object a line, written by rank 0,
// appended across requeues. Each record goes out in one write(2) of a whole line, so a reader
// (hpctrain status) never sees half a record from a live run, and a crash loses at most the
// line being written.
// Thread safety: one writer thread.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>

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

}  // namespace hpctrain::train
