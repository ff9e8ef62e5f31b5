// The step's output as the step supervisor reads it back to classify the step's end
// (supervisor/causes.hpp): the batch job's stderr, which is the supervisor's own fd 2 (the batch
// script execs it) and where srun, slurmstepd and the workers write their errors. Nothing is read
// where fd 2 is not a regular file (a terminal, a pipe).
// Thread safety: one object per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::supervisor {

class StepOutput {
 public:
  // Notes where fd 2 ends now: the start of the next step's lines.
  void mark();
  // The complete lines written to fd 2 since mark(), in order; at most the last `max_bytes` of
  // them (a first line cut there is left out).
  std::vector<std::string> lines(size_t max_bytes = kMaxBytes) const;

  static constexpr size_t kMaxBytes = 1 << 20;

 private:
  std::optional<int64_t> offset_;
};

}  // namespace hpctrain::supervisor
