// Our side of the JPEG benchmark (bench/data/jpeg/README.md): hpctrain's loader on format-version-2
// shards, decode + random-resized-crop + flip per sample on `--threads` loader threads, against the
// Python peers on the same JPEGs (the DataLoader with PIL, DALI's CPU pipeline).
//   bench_jpeg --data 'DIR/train-*.h5' [--threads 2] [--batch 64] [--images 4000]
//              [--image-size 224] [--float]
// Skips 2 warm-up batches, then times at least --images images, new epochs as needed. Prints one
// JSON line: images/s after warm-up and including start-up, peak RSS, thread counts.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "data/loader.hpp"
#include "data/source.hpp"

namespace data = hpctrain::data;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int threads_in_process() {
  int n = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, "Threads:", 8) == 0) n = std::atoi(line + 8);
    }
    std::fclose(f);
  }
  return n;
}

struct Options {
  std::string pattern;
  int64_t threads = 2, batch = 64, images = 4000, image_size = 224;
  bool use_float = false;
};

// The command line; exits 2 on a usage error.
Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "bench_jpeg: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data") {
      o.pattern = next();
    } else if (a == "--threads") {
      o.threads = std::stoll(next());
    } else if (a == "--batch") {
      o.batch = std::stoll(next());
    } else if (a == "--images") {
      o.images = std::stoll(next());
    } else if (a == "--image-size") {
      o.image_size = std::stoll(next());
    } else if (a == "--float") {
      o.use_float = true;
    } else {
      std::cerr << "bench_jpeg: unknown argument " << a << "\n";
      std::exit(2);
    }
  }
  if (o.pattern.empty()) {
    std::cerr << "bench_jpeg: --data GLOB is required\n";
    std::exit(2);
  }
  return o;
}

data::LoaderConfig loader_config(const Options& o) {
  data::LoaderConfig c;
  c.batch_size = o.batch;
  c.workers = o.threads;
  c.prefetch_batches = 2;
  c.seed = 1;
  c.shuffle = true;
  c.transform.train = true;
  c.transform.augment = data::Augment::kRandomResizedCrop;
  c.transform.image_size = o.image_size;
  // uint8 NHWC: what the GPU path gets; float32 NCHW normalised: the CPU path.
  c.transform.output = o.use_float ? data::OutputType::kFloat32 : data::OutputType::kUint8;
  c.transform.layout = o.use_float ? data::Layout::kNCHW : data::Layout::kNHWC;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  const auto t_start = std::chrono::steady_clock::now();
  const auto source = data::ImageSource::open({o.pattern});
  data::Loader loader(source, loader_config(o));

  int64_t epoch = 0, delivered = 0, timed = 0, warm = 0, peak_threads = 0;
  uint64_t checksum = 0;
  std::chrono::steady_clock::time_point t_timed;
  loader.start_epoch(epoch);
  while (timed < o.images) {
    auto b = loader.next();
    if (!b) {
      loader.start_epoch(++epoch);
      continue;
    }
    checksum += static_cast<const uint8_t*>(b->data())[b->bytes() / 2];
    delivered += b->size;
    peak_threads = std::max<int64_t>(peak_threads, threads_in_process());
    if (warm < 2) {
      if (++warm == 2) t_timed = std::chrono::steady_clock::now();
      continue;
    }
    timed += b->size;
  }
  const double timed_s = seconds_since(t_timed), all_s = seconds_since(t_start);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const data::LoaderStats st = loader.stats();
  std::printf(
      "{\"peer\":\"hpctrain\",\"threads\":%lld,\"process_threads\":%lld,\"images\":%lld,"
      "\"images_per_s\":%.1f,\"images_per_s_incl_start\":%.1f,\"peak_rss_mib\":%.1f,"
      "\"read_s\":%.2f,\"transform_s\":%.2f,\"epochs\":%lld,\"output\":\"%s\",\"checksum\":%llu}\n",
      static_cast<long long>(o.threads), static_cast<long long>(peak_threads),
      static_cast<long long>(timed), static_cast<double>(timed) / timed_s,
      static_cast<double>(delivered) / all_s, static_cast<double>(ru.ru_maxrss) / 1024.0, st.read_s,
      st.transform_s, static_cast<long long>(epoch + 1),
      o.use_float ? "float32_nchw" : "uint8_nhwc", static_cast<unsigned long long>(checksum));
  return 0;
}
