// The suspects records of RUN_DIR/metrics.jsonl (hang, evict: common/records.hpp's
// SuspectsRecord) that name ranks for the step supervisor to treat as lost, as the worker writes
// them: the hang watchdog's thread, and the trainer's reporter for an evicted straggler's node.
// Thread safety: reentrant (each call appends one whole line).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/records.hpp"

namespace hpctrain::train {

// Appends a suspects record of `kind` (kHang or kEvict) to RUN_DIR/metrics.jsonl: `ranks`, their
// distinct hosts (rank r's is hosts[r]), the step tag, the step, `message` and the time. Throws
// rt::Error (std::invalid_argument for another kind).
void write_suspects(const std::filesystem::path& run_dir, records::MetricsKind kind,
                    const std::string& step_tag, int64_t step, const std::vector<int>& ranks,
                    const std::vector<std::string>& hosts, const std::string& message);
}  // namespace hpctrain::train
