// One checkpoint save through the store, timed: write_part of FILES files of BYTES in all, then
// merge_node and commit, into DIR/checkpoints. Prints one JSON line: the bytes, the seconds of
// each phase, MiB/s, the size of manifest.json, and the peak resident memory of this process (the
// payload itself included, as the trainer's host snapshot would be). bench/ckpt/run.sh runs it
// against dd.
// With --ranks N (--ranks-per-node M), N Stores of one process, one per emulated rank over one
// shared NodeLayout, run each phase from a pool of threads: rank 0 writes the payload, every
// other rank a 4 KiB file of its own (its RNG state, as the trainer's); the fan-in's cost (the
// leaders' merges, rank 0's commit) against the ranks and nodes.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// Runs `phase` for every rank on a pool of threads; the first failure, or "".
std::string on_every_rank(int ranks, const std::function<std::string(int rank)>& phase) {
  std::atomic<int> next{0};
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> pool;
  const int threads = std::min(ranks, 64);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int r = next++; r < ranks; r = next++) errors[static_cast<size_t>(r)] = phase(r);
    });
  }
  for (auto& thread : pool) thread.join();
  for (const auto& e : errors) {
    if (!e.empty()) return e;
  }
  return "";
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
  int ranks = 1, per_node = 1;
  app.add_option("--ranks", ranks, "emulated ranks, one Store each")->check(CLI::Range(1, 100000));
  app.add_option("--ranks-per-node", per_node, "ranks sharing a node (contiguous)")
      ->check(CLI::Range(1, 100000));
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
    std::vector<int> node_of_rank;
    for (int r = 0; r < ranks; ++r) node_of_rank.push_back(r / per_node);
    const auto layout = std::make_shared<const hpctrain::checkpoint::NodeLayout>(node_of_rank);
    std::vector<std::unique_ptr<hpctrain::checkpoint::Store>> stores;
    for (int r = 0; r < ranks; ++r) {
      stores.push_back(
          std::make_unique<hpctrain::checkpoint::Store>(dir + "/checkpoints", options, r, layout));
    }
    std::vector<hpctrain::checkpoint::Part> parts(static_cast<size_t>(ranks));
    parts[0] = std::move(part);
    for (int r = 1; r < ranks; ++r) {
      parts[static_cast<size_t>(r)].files["rng-" + std::to_string(r) + ".bin"] =
          payload(4096, static_cast<uint64_t>(r));
    }

    const auto t0 = std::chrono::steady_clock::now();
    const std::string write_error = on_every_rank(ranks, [&](int r) {
      return stores[static_cast<size_t>(r)]->write_part(step, parts[static_cast<size_t>(r)]).error;
    });
    const double write_s = since(t0);
    if (!write_error.empty()) throw std::runtime_error(write_error);
    const auto t1 = std::chrono::steady_clock::now();
    const std::string merge_error = on_every_rank(
        ranks, [&](int r) { return stores[static_cast<size_t>(r)]->merge_node(step).error; });
    const double merge_s = since(t1);
    if (!merge_error.empty()) throw std::runtime_error(merge_error);
    const auto t2 = std::chrono::steady_clock::now();
    stores[0]->commit(step, nlohmann::json::object());
    const double commit_s = since(t2);
    const std::string manifest =
        dir + "/checkpoints/" + hpctrain::checkpoint::Store::step_name(step) + "/manifest.json";
    const auto manifest_stat = hpctrain::checkpoint::default_env().stat(manifest, false);

    struct rusage usage {};
    ::getrusage(RUSAGE_SELF, &usage);
    const double total_s = write_s + merge_s + commit_s;
    std::cout << nlohmann::json{{"bytes", bytes},
                                {"files", files},
                                {"ranks", ranks},
                                {"nodes", layout->nodes()},
                                {"write_s", write_s},
                                {"merge_s", merge_s},
                                {"commit_s", commit_s},
                                {"manifest_bytes", manifest_stat ? manifest_stat->size : -1},
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
