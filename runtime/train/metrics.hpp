// RUN_DIR/metrics.jsonl as the trainer writes it: common/records.hpp's MetricsLog (one write(2)
// of a whole line per record, typed records through their one writer) and the suspects records
// (hang, evict) that name ranks for the step supervisor to treat as lost.
// Thread safety: one writer thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/records.hpp"

namespace hpctrain::train {

class MetricsLog : public records::MetricsLog {
 public:
  using records::MetricsLog::MetricsLog;
  using records::MetricsLog::write;
  // Appends an untyped `record` as one line, for the trainer's records until it writes typed
  // ones (records::TrainRecord, EvalRecord, RanksRecord, StartedRecord); to be removed then.
  void write(const nlohmann::json& record);
};

// Appends a suspects record of `kind` (kHang or kEvict) to RUN_DIR/metrics.jsonl: `ranks`, their
// distinct hosts (rank r's is hosts[r]), the step tag, the step, `message` and the time. Throws
// rt::Error (std::invalid_argument for another kind).
void write_suspects(const std::filesystem::path& run_dir, records::MetricsKind kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message);
// The same with the kind by name ("hang", "evict"), for the trainer until it passes the kind.
void write_suspects(const std::filesystem::path& run_dir, const std::string& kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message);

}  // namespace hpctrain::train
