// The per-step agreement of the ranks (torch-free): one small all-reduced vector of floats per
// step settles everything the ranks must decide alike, so that every rank takes the same
// decision at the same step with no other message: the fp16 inf/NaN verdict, a stop signal on
// any rank, rank 0's clock-based checkpoint decisions and the state of a background save.
// Each rank fills its slots (a flag is 1, and the sum over the ranks is above 0 when any rank
// raised it); the trainer all-reduces them (train/agreement_exchange.hpp).
//
// On the device path the agreed values come back to the host one step late (nothing in a step
// waits for the device): OneStepLate holds the agreement in flight and the one to act on.
// Thread safety: none; the training thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace hpctrain::train {

// Slots of the agreement; the checkpointer reads and fills its own (train/checkpointing.hpp).
struct Agreement {
  static constexpr int kFoundInf = 0;  // fp16: some gradient was inf/NaN (skip the step)
  static constexpr int kStop = 1;      // a stop signal reached some rank
  static constexpr int kSaveNow = 2;   // rank 0: the minutes interval or the deadline is due
  static constexpr int kDeadline = 3;  // rank 0: the job's time limit is near: save and stop
  static constexpr int kWritePending = 4;
  static constexpr int kWriteFailed = 5;
  static constexpr int kWriteDone = 6;
  static constexpr int kSize = 7;
};

// An agreement the ranks reached, as a step may act on it.
struct Agreed {
  const float* slots = nullptr;  // Agreement::kSize values; null: none to act on this step
  int64_t gathered_at = 0;       // the step counter when the ranks contributed
};

// Agreement::kSize zeros: what a step acts on when it has no agreement yet.
extern const float kNothingAgreed[Agreement::kSize];

// This rank's stop slot: `pending_signal` is the stop signal it received (0: none).
void contribute_stop(float* slots, int pending_signal);

// Whether the agreed `slots` stop the run, and why: a stop signal on some rank ("signal
// Terminated" when it reached this one, `own_signal`; "a stop signal on another rank" when not),
// or the job's time limit. nullopt: train on.
std::optional<std::string> stop_reason(const float* slots, int own_signal);

// The device path's agreements on their way to the host: each step queues its own (push), and
// acts on the one queued a step before (take). The first step has none to act on.
template <class Value>
class OneStepLate {
 public:
  struct Entry {
    Value value;
    int64_t gathered_at = 0;  // the step counter when the ranks contributed
  };

  // Queues this step's agreement; the one queued before becomes the one to take.
  void push(Value value, int64_t gathered_at) {
    ready_ = std::exchange(queued_, Entry{std::move(value), gathered_at});
  }
  // The agreement queued before the last push(), once; nullopt after the first push and after
  // a take.
  std::optional<Entry> take() { return std::exchange(ready_, std::nullopt); }

 private:
  std::optional<Entry> queued_, ready_;
};

}  // namespace hpctrain::train
