#include "run/trend.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace hpctrain::run {

std::string sparkline(const std::vector<std::optional<double>>& values) {
  static const char* const kLevels[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  constexpr int kTop = 7;
  double lo = INFINITY;
  double hi = -INFINITY;
  for (const auto& v : values) {
    if (v) {
      lo = std::min(lo, *v);
      hi = std::max(hi, *v);
    }
  }
  std::string out;
  for (const auto& v : values) {
    if (!v) {
      out += "!";
    } else if (!(hi > lo)) {
      out += kLevels[3];
    } else {
      const int level = static_cast<int>(std::lround((*v - lo) / (hi - lo) * kTop));
      out += kLevels[std::clamp(level, 0, kTop)];
    }
  }
  return out;
}

std::optional<LossTrend> loss_trend(const std::vector<records::MetricsRecord>& records,
                                    size_t buckets) {
  // One value per step: a later line for the same step (written again after a resume) wins.
  std::map<int64_t, std::optional<double>> by_step;
  for (const auto& record : records) {
    const auto* r = std::get_if<records::TrainRecord>(&record);
    if (!r) continue;
    std::optional<double> loss;
    if (r->loss && std::isfinite(*r->loss)) loss = r->loss;
    by_step[r->step] = loss;
  }
  if (by_step.empty()) return std::nullopt;
  std::vector<std::optional<double>> points;
  points.reserve(by_step.size());
  for (const auto& [step, loss] : by_step) points.push_back(loss);

  LossTrend t;
  t.first_step = by_step.begin()->first;
  t.last_step = by_step.rbegin()->first;
  t.first_loss = points.front();
  t.last_loss = points.back();
  t.points = points.size();
  t.non_finite = static_cast<size_t>(
      std::count_if(points.begin(), points.end(), [](const auto& p) { return !p.has_value(); }));
  const size_t n = points.size();
  const size_t b = std::max<size_t>(1, std::min(buckets, n));
  for (size_t i = 0; i < b; ++i) {
    // Bucket i holds points [i*n/b, (i+1)*n/b): every point in exactly one bucket.
    const size_t from = i * n / b;
    const size_t to = (i + 1) * n / b;
    double sum = 0;
    size_t count = 0;
    for (size_t k = from; k < to; ++k) {
      if (points[k]) {
        sum += *points[k];
        ++count;
      }
    }
    t.buckets.push_back(count ? std::optional<double>(sum / static_cast<double>(count))
                              : std::nullopt);
  }
  t.sparkline = sparkline(t.buckets);
  return t;
}

}  // namespace hpctrain::run
