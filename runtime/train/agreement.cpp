#include "train/agreement.hpp"

#include <cstring>

namespace hpctrain::train {

const float kNothingAgreed[Agreement::kSize] = {};

void contribute_stop(float* slots, int pending_signal) {
  slots[Agreement::kStop] = pending_signal != 0 ? 1 : 0;
}

std::optional<std::string> stop_reason(const float* slots, int own_signal) {
  if (slots[Agreement::kStop] > 0) {
    return own_signal != 0 ? std::string("signal ") + ::strsignal(own_signal)
                           : "a stop signal on another rank";
  }
  if (slots[Agreement::kDeadline] > 0) return "the job's time limit is near";
  return std::nullopt;
}

}  // namespace hpctrain::train
