// hpctrain-worker --selftest: checks all-reduce and broadcast results exactly over a range of
// sizes, then prints a bandwidth table as nccl-tests does (algorithm and bus bandwidth).
// Thread safety: main thread only.
#pragma once

#include <cstdint>
#include <ostream>

#include "dist/communicator.hpp"

namespace hpctrain::worker {

struct SelftestOptions {
  int64_t min_bytes = 8;
  int64_t max_bytes = 64 << 20;
  int iterations = 20;  // timed all-reduces per size (fewer for large sizes, at least 3)
  int warmup = 3;
  // After the checks, keep all-reducing 1 MiB for this long (failure tests kill a rank meanwhile).
  double soak_seconds = 0;
};

// Returns the number of failed checks (0 on success), the same on every rank.
int run_selftest(dist::Communicator& comm, const SelftestOptions& options, std::ostream& out);

}  // namespace hpctrain::worker
