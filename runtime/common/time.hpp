// Time, in one place: the monotonic clock for durations and deadlines, and the wall clock as the
// run directory's records write it (Unix seconds with the fraction, UTC ISO 8601 to the second
// or the millisecond) and read it back.
// Thread safety: reentrant.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace hpctrain {

// The monotonic clock: durations, deadlines, progress figures.
using Clock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A duration for a message, in seconds to the tenth (truncated), the tenth left out when 0:
// "5 s", "5.2 s" (the heartbeat's and the hang watchdog's verdicts).
std::string seconds_text(std::chrono::milliseconds d);

// The wall clock as Unix seconds with the fraction (metrics.jsonl's wall_time).
double unix_time();
// The wall clock as Unix milliseconds.
int64_t unix_time_ms();

// The time now in UTC to the second: "2026-11-23T09:06:01Z", the form of every record's time
// stamp (submissions, the ledger, checkpoint manifests).
std::string utc_now();
// Unix milliseconds `ms` in UTC with milliseconds: "2026-11-26T10:02:03.456Z".
std::string utc_ms(int64_t ms);

// "2026-11-22T02:48:10Z", with or without a fraction of a second before the Z
// ("2026-11-23T23:41:08.412Z"), as Unix seconds; nullopt for any other text.
std::optional<double> parse_utc(const std::string& text);

}  // namespace hpctrain
