// Lustre striping of the checkpoint directory. Checkpoint files are large and written by few
// ranks, so spreading them over several OSTs is what makes them fast on Lustre; new step
// directories and files inherit the directory's layout. The decision is a pure function (tested
// without Lustre); apply_striping() runs `lfs setstripe` by argv, never through a shell.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain::checkpoint {

class Env;

// statfs's f_type on Lustre (LUSTRE_SUPER_MAGIC in lustre_user.h, which we do not require).
inline constexpr int64_t kLustreSuperMagic = 0x0BD00BD0;

struct StripePlan {
  bool stripe = false;
  std::vector<std::string> argv;  // lfs setstripe ... DIR, when stripe
  std::string reason;             // why not, or what it sets; for the log
};

// stripe_count: 0 = the filesystem's default, -1 = every OST, else the count;
// stripe_size_bytes: 0 = the default. Stripes only on Lustre and only when something is set.
StripePlan plan_striping(int64_t fs_type, int64_t stripe_count, int64_t stripe_size_bytes,
                         const std::string& dir);

// Plans for `dir` (its filesystem type through env) and runs the plan, within `timeout_s`.
// Throws rt::Error with lfs's own message when it fails or cannot be run.
StripePlan apply_striping(Env& env, const std::string& dir, int64_t stripe_count,
                          int64_t stripe_size_bytes, int timeout_s = 60);

}  // namespace hpctrain::checkpoint
