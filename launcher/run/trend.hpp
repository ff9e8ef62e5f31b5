// The training-loss trend that `hpctrain status` prints: the train lines of metrics.jsonl, one
// value per step (a resumed run writes some steps again; the copy written last counts), resampled
// into a fixed number of buckets and drawn as a sparkline. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/records.hpp"

namespace hpctrain::run {

struct LossTrend {
  int64_t first_step = 0;
  int64_t last_step = 0;
  // The loss at the first and last step; nullopt where it was not finite (the worker writes a NaN
  // or infinite loss as null).
  std::optional<double> first_loss;
  std::optional<double> last_loss;
  size_t points = 0;      // distinct steps with a train line
  size_t non_finite = 0;  // of those, the ones without a finite loss
  // The mean finite loss of each bucket, nullopt for a bucket with none. As many buckets as
  // points when there are fewer points than buckets.
  std::vector<std::optional<double>> buckets;
  std::string sparkline;  // one character per bucket (UTF-8), "!" for a bucket with no finite loss
};

inline constexpr size_t kTrendBuckets = 10;

// The trend of the train records' loss; nullopt when there is no train record. Points are
// ordered by step and split into `buckets` runs of (nearly) equal length.
std::optional<LossTrend> loss_trend(const std::vector<records::MetricsRecord>& records,
                                    size_t buckets = kTrendBuckets);

// Eight levels, ▁ (the lowest bucket) to █ (the highest); a flat line is drawn at ▄.
std::string sparkline(const std::vector<std::optional<double>>& values);

}  // namespace hpctrain::run
