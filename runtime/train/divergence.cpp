#include "train/divergence.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "spec/spec.hpp"

namespace hpctrain::train {

DivergenceOptions divergence_options_from_spec(const spec::Spec& spec) {
  DivergenceOptions o;
  o.fp16 = spec.train.precision == spec::Precision::kFp16;
  o.spike_factor = spec.resilience.loss_spike_factor;
  o.fp16_skip_limit = spec.resilience.fp16_skip_limit;
  return o;
}

namespace {

std::string steps_text(int64_t first, int64_t last) {
  return first == last ? "step " + std::to_string(last)
                       : "steps " + std::to_string(first) + "-" + std::to_string(last);
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

std::optional<std::string> DivergenceGuard::watch(int64_t first_step, int64_t last_step,
                                                  double mean_loss, double loss_scale) {
  const int64_t steps = last_step - first_step + 1;
  if (o_.fp16) {
    // Every step of the window skipped: the scale went down by backoff_factor^steps exactly.
    // Growth doubles the scale after many steps without a skip, so nothing else gets it there.
    const bool all_skipped =
        scale_ && steps > 0 &&
        loss_scale <=
            *scale_ * std::pow(o_.backoff_factor, static_cast<double>(steps)) * (1 + 1e-9);
    skipped_ = all_skipped ? skipped_ + steps : 0;
    scale_ = loss_scale;
    if (o_.fp16_skip_limit > 0 && skipped_ >= o_.fp16_skip_limit) {
      return "the loss scaler skipped every step for " + std::to_string(skipped_) +
             " steps in a row (through step " + std::to_string(last_step) + ", scale now " +
             number(loss_scale) +
             "; resilience.fp16_skip_limit = " + std::to_string(o_.fp16_skip_limit) + ")";
    }
    if (!std::isfinite(mean_loss)) return std::nullopt;  // the scaler's to handle
  } else if (!std::isfinite(mean_loss)) {
    return "the loss is " + number(mean_loss) + " over " + steps_text(first_step, last_step);
  }
  if (o_.spike_factor > 0 && recent_.size() == kHistory) {
    std::vector<double> sorted(recent_.begin(), recent_.end());
    std::nth_element(sorted.begin(), sorted.begin() + kHistory / 2, sorted.end());
    const double median = sorted[kHistory / 2];
    if (median > 0 && mean_loss > o_.spike_factor * median) {
      return "the loss spiked to " + number(mean_loss) + " over " +
             steps_text(first_step, last_step) + ", " + number(mean_loss / median) +
             " times the median of the last " + std::to_string(kHistory) + " log windows (" +
             number(median) + "; resilience.loss_spike_factor = " + number(o_.spike_factor) + ")";
    }
  }
  recent_.push_back(mean_loss);
  if (recent_.size() > kHistory) recent_.pop_front();
  return std::nullopt;
}

}  // namespace hpctrain::train
