// One rank of an hpctrain job: what `hpctrain-worker` does once main() has parsed its options.
// Joins the job from the launch environment and runs the spec (or the diagnostics that replace it:
// --describe-env, --selftest). Errors are thrown (common/error.hpp, spec::SpecError); main() maps
// them to exit statuses (common/exit_codes.hpp).
// Thread safety: call once, from the main thread.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain::worker {

struct Options {
  std::string spec_file;  // the frozen spec (RUN_DIR/spec.toml); empty only for diagnostics
  bool describe_env = false;
  bool selftest = false;
  int64_t selftest_max_bytes = 64 << 20;
  double selftest_soak_s = 0;
};

// Returns the exit status: kExitOk, kExitFailure (a selftest check failed) or kExitRequeue.
int run(const Options& options);

}  // namespace hpctrain::worker
