// One checkpoint save through the store, timed: write_part of FILES files of BYTES in all, then
// commit (world size 1), into DIR/checkpoints. Prints one JSON line: the bytes, the seconds of
// each phase, MiB/s, and the peak resident memory of this process (the payload itself included,
// as the trainer's host snapshot would be). bench/ckpt/run.sh runs it against dd.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "checkpoint/store.hpp"
#include "common/error.hpp"

namespace {

// Incompressible bytes, so no filesystem or device can cheat on them.
std::string payload(size_t size, uint64_t seed) {
  std::string bytes(size, '\0');
  uint64_t state = seed;
  for (size_t i = 0; i + 8 <= size; i += 8) {
    state += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    for (int b = 0; b < 8; ++b) bytes[i + b] = static_cast<char>(z >> (8 * b));
  }
  return bytes;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times one checkpoint save through hpctrain's checkpoint store."};
  std::string dir;
  int64_t bytes = 256 << 20, files = 4, step = 1;
  app.add_option("--dir", dir, "run directory (checkpoints/ is made inside)")->required();
  app.add_option("--bytes", bytes, "bytes in all")->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--files", files, "files they are split into")->check(CLI::Range(1, 1000));
  app.add_option("--step", step, "step number to save")->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    hpctrain::checkpoint::Part part;
    for (int64_t i = 0; i < files; ++i) {
      const int64_t size = bytes / files + (i < bytes % files ? 1 : 0);
      part.files["part-" + std::to_string(i) + ".bin"] =
          payload(static_cast<size_t>(size), static_cast<uint64_t>(step * 1000 + i));
    }
    hpctrain::checkpoint::StoreOptions options;
    options.keep_last = 1000;  // retention's deletions are not what is measured
    hpctrain::checkpoint::Store store(dir + "/checkpoints", options, 0, 1);

    const auto t0 = std::chrono::steady_clock::now();
    const auto written = store.write_part(step, part);
    const double write_s = since(t0);
    if (!written) throw std::runtime_error(written.error);
    const auto t1 = std::chrono::steady_clock::now();
    store.commit(step, nlohmann::json::object());
    const double commit_s = since(t1);

    struct rusage usage {};
    ::getrusage(RUSAGE_SELF, &usage);
    const double total_s = write_s + commit_s;
    std::cout << nlohmann::json{{"bytes", bytes},
                                {"files", files},
                                {"write_s", write_s},
                                {"commit_s", commit_s},
                                {"total_s", total_s},
                                {"mib_per_s", static_cast<double>(bytes) / (1 << 20) / total_s},
                                {"peak_rss_mib", static_cast<double>(usage.ru_maxrss) / 1024}}
                     .dump()
              << '\n';
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
  return 0;
}
