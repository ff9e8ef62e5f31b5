// The process kill_test.sh kills. Two ranks (two Stores of one process, world size 2) save
// checkpoints of payloads that are a pure function of (seed, step, rank) (payload.hpp):
//
//   ckpt_kill_tool save DIR SEED   resumes after the newest committed step and saves the next
//                                  ones until killed, printing "committed N" after each commit
//   ckpt_kill_tool load DIR SEED   rank 0 cleans leftovers; both ranks load the newest step and
//                                  check every byte against what that step must hold; prints
//                                  "loaded N removed K" (or "loaded none removed K"); exit 1 on
//                                  any mismatch, 2 on usage or store errors.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "checkpoint/store.hpp"
#include "common/error.hpp"
#include "payload.hpp"

namespace {

using hpctrain::checkpoint::Store;
using hpctrain::checkpoint::StoreOptions;
namespace ckpt_test = hpctrain::checkpoint::test;

// Big enough that a kill often lands inside a write, small enough for many saves a second.
constexpr size_t kMaxBytes = 256 << 10;

StoreOptions options() {
  StoreOptions o;
  o.keep_last = 2;
  return o;
}

int save(const std::string& dir, uint64_t seed) {
  Store rank0(dir, options(), 0, 2), rank1(dir, options(), 1, 2);
  rank0.clean_leftovers();
  const auto last = rank0.load_latest(ckpt_test::shared_files());
  for (int64_t step = last ? last->step + 1 : 1;; ++step) {
    const auto w1 = rank1.write_part(step, ckpt_test::make_part(seed, step, 1, kMaxBytes));
    const auto w0 = rank0.write_part(step, ckpt_test::make_part(seed, step, 0, kMaxBytes));
    if (!w0 || !w1) {
      std::cerr << w0.error << w1.error << '\n';
      return 2;
    }
    const auto m1 = rank1.merge_node(step);
    const auto m0 = rank0.merge_node(step);
    if (!m0 || !m1) {
      std::cerr << m0.error << m1.error << '\n';
      return 2;
    }
    rank0.commit(step, {{"seed", seed}, {"step", step}});
    // One write(2), so a kill never leaves half a line.
    const std::string line = "committed " + std::to_string(step) + "\n";
    if (::write(1, line.data(), line.size()) < 0) return 2;
  }
}

int load(const std::string& dir, uint64_t seed) {
  Store rank0(dir, options(), 0, 2), rank1(dir, options(), 1, 2);
  const auto removed = rank0.clean_leftovers();
  const auto on0 = rank0.load_latest(ckpt_test::shared_files());
  const auto on1 = rank1.load_latest(ckpt_test::shared_files());
  if (on0.has_value() != on1.has_value() || (on0 && on0->step != on1->step)) {
    std::cerr << "ranks loaded different steps\n";
    return 1;
  }
  if (!on0) {
    std::cout << "loaded none removed " << removed.size() << '\n';
    return 0;
  }
  const int64_t step = on0->step;
  if (on0->files != ckpt_test::expected_files(seed, step, 0, kMaxBytes) ||
      on1->files != ckpt_test::expected_files(seed, step, 1, kMaxBytes) ||
      on0->meta != nlohmann::json({{"seed", seed}, {"step", step}})) {
    std::cerr << "step " << step << " does not hold what was saved at that step\n";
    return 1;
  }
  // Only committed steps are left: no temporary or uncommitted directory of ours.
  for (const auto& name : hpctrain::checkpoint::default_env().list_dir(dir)) {
    if (name.rfind(".step-", 0) == 0 ||
        (name.rfind("step-", 0) == 0 &&
         !hpctrain::checkpoint::default_env().stat(dir + "/" + name + "/manifest.json", false))) {
      std::cerr << name << " left over after clean_leftovers\n";
      return 1;
    }
  }
  std::cout << "loaded " << step << " removed " << removed.size() << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: ckpt_kill_tool save|load DIR SEED\n";
    return 2;
  }
  const std::string mode = argv[1], dir = argv[2];
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  try {
    if (mode == "save") return save(dir, seed);
    if (mode == "load") return load(dir, seed);
  } catch (const hpctrain::rt::Error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
  std::cerr << "unknown mode " << mode << '\n';
  return 2;
}
