#include "checkpoint/striping.hpp"

#include <chrono>

#include "checkpoint/env.hpp"
#include "common/error.hpp"
#include "common/process.hpp"

namespace hpctrain::checkpoint {

StripePlan plan_striping(int64_t fs_type, int64_t stripe_count, int64_t stripe_size_bytes,
                         const std::string& dir) {
  StripePlan plan;
  if (stripe_count == 0 && stripe_size_bytes == 0) {
    plan.reason = "no striping configured (checkpoint.lustre_stripe_count and _size_mib are 0)";
    return plan;
  }
  if (fs_type != kLustreSuperMagic) {
    plan.reason = dir + " is not on Lustre; striping settings ignored";
    return plan;
  }
  plan.stripe = true;
  plan.argv = {"lfs", "setstripe"};
  if (stripe_count != 0) {
    plan.argv.insert(plan.argv.end(), {"-c", std::to_string(stripe_count)});
  }
  if (stripe_size_bytes != 0) {
    plan.argv.insert(plan.argv.end(), {"-S", std::to_string(stripe_size_bytes)});
  }
  // A relative name starting with '-' would read as an option.
  plan.argv.push_back(dir.empty() || dir[0] != '-' ? dir : "./" + dir);
  plan.reason = "striping " + dir + ": stripe count " +
                (stripe_count == 0  ? std::string("default")
                 : stripe_count < 0 ? std::string("all OSTs")
                                    : std::to_string(stripe_count)) +
                ", stripe size " +
                (stripe_size_bytes == 0 ? std::string("default")
                                        : std::to_string(stripe_size_bytes >> 20) + " MiB");
  return plan;
}

StripePlan apply_striping(Env& env, const std::string& dir, int64_t stripe_count,
                          int64_t stripe_size_bytes, int timeout_s) {
  if (stripe_count == 0 && stripe_size_bytes == 0) {
    return plan_striping(0, stripe_count, stripe_size_bytes, dir);  // no statfs needed
  }
  StripePlan plan = plan_striping(env.fs_type(dir), stripe_count, stripe_size_bytes, dir);
  if (!plan.stripe) return plan;
  const auto result = common::run_command(plan.argv, std::chrono::seconds(timeout_s));
  if (result.exit_status != 0 || result.timed_out || result.not_found) {
    std::string command;
    for (const auto& a : plan.argv) command += (command.empty() ? "" : " ") + a;
    std::string err = result.err;
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    const std::string how = result.not_found ? "could not be run"
                            : result.timed_out
                                ? "gave no answer in " + std::to_string(timeout_s) + " s"
                                : "failed with exit status " + std::to_string(result.exit_status);
    HPCTRAIN_THROW(rt::Error, command + " " + how + (err.empty() ? "" : ": " + err));
  }
  return plan;
}

}  // namespace hpctrain::checkpoint
