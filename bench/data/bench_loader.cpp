// Benchmark driver for the data loader (bench/data/run.sh runs it next to the Python peer).
//   bench_loader gen FILE N SIZE CHANNELS [CHUNK_IMAGES]   random dataset in the v1 layout
//   bench_loader raw FILE [--cold]                         sequential read bandwidth (8 MiB preads)
//   bench_loader load FILE [options]                       loader images/s
//     --workers W --batch B --augment none|crop_flip|random_resized_crop --image-size S
//     --output float|uint8 --layout nchw|nhwc --no-shuffle --hdf5-reads --epochs E --cold
//     --no-cache --no-readahead --readahead-batches R --no-coalesce
//   bench_loader open FILE                                 seconds to open (chunk index scan)
//   bench_loader randread FILE BYTES THREADS [--cold]      the disk alone: the whole file in
//     BYTES-sized preads in a shuffled order, THREADS at a time (I/O depth), like fio randread
// --cold evicts the file from the page cache first (posix_fadvise DONTNEED), so the figure is
// the disk's, not memory's. Output is one line of key=value pairs for run.sh to tabulate.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "data/loader.hpp"
#include "data/rng.hpp"
#include "dataset_writer.hpp"

namespace hd = hpctrain::data;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void evict(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

int gen(const std::string& path, int64_t n, int64_t size, int64_t channels, int64_t chunk) {
  std::vector<std::string> names;
  for (int i = 0; i < 10; ++i) names.push_back("c" + std::to_string(i));
  hpctrain::datasets::DatasetWriter writer(path, n, size, size, channels, names, {chunk});
  const int64_t sb = size * size * channels;
  const int64_t block = std::max<int64_t>(1, (64 << 20) / sb);
  std::vector<uint8_t> images(static_cast<size_t>(block * sb));
  std::vector<int64_t> labels(static_cast<size_t>(block));
  hd::SplitMix64 rng(1);
  for (int64_t first = 0; first < n; first += block) {
    const int64_t count = std::min(block, n - first);
    for (size_t i = 0; i + 8 <= images.size(); i += 8) {
      const uint64_t v = rng.next();
      std::memcpy(&images[i], &v, 8);
    }
    for (auto& l : labels) l = static_cast<int64_t>(rng.below(10));
    writer.write(first, count, images.data(), labels.data());
  }
  writer.finish();
  return 0;
}

int raw(const std::string& path, bool cold) {
  if (cold) evict(path);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    std::perror(path.c_str());
    return 1;
  }
  std::vector<char> buf(8 << 20);
  const double t0 = now_s();
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(total));
    if (n <= 0) break;
    total += static_cast<uint64_t>(n);
  }
  const double dt = now_s() - t0;
  ::close(fd);
  std::printf("mode=raw bytes=%llu seconds=%.4f MBps=%.1f\n",
              static_cast<unsigned long long>(total), dt, total / dt / 1e6);
  return 0;
}

// What the disk does with shuffled reads of one image's size at a given depth: the ceiling for
// the loader's uncached reads, without HDF5, transforms or batching.
int randread(const std::string& path, int64_t bytes, int64_t threads, bool cold) {
  if (cold) evict(path);
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || bytes < 1 || threads < 1) {
    std::perror(path.c_str());
    return 1;
  }
  const off_t size = ::lseek(fd, 0, SEEK_END);
  std::vector<int64_t> order(static_cast<size_t>(size / bytes));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  hd::SplitMix64 rng(3);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> total{0};
  const double t0 = now_s();
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      std::vector<char> buf(static_cast<size_t>(bytes));
      for (size_t i = next++; i < order.size(); i = next++) {
        const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(order[i] * bytes));
        if (n > 0) total += static_cast<uint64_t>(n);
      }
    });
  }
  for (auto& t : pool) t.join();
  const double dt = now_s() - t0;
  ::close(fd);
  std::printf("mode=randread bytes=%llu seconds=%.4f MBps=%.1f threads=%lld read_bytes=%lld\n",
              static_cast<unsigned long long>(total.load()), dt, total.load() / dt / 1e6,
              static_cast<long long>(threads), static_cast<long long>(bytes));
  return 0;
}

// load's settings: the loader's, the source's, and how to run.
struct LoadOptions {
  hd::LoaderConfig cfg;
  hd::SourceOptions sopts;
  int64_t epochs = 1;
  bool cold = false;
};

// False, having said why, on an unknown option.
bool parse_load_options(int argc, char** argv, LoadOptions& o) {
  hd::LoaderConfig& cfg = o.cfg;
  cfg.workers = 2;
  cfg.batch_size = 256;
  cfg.prefetch_batches = 4;
  cfg.seed = 7;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&] { return std::string(i + 1 < argc ? argv[++i] : ""); };
    if (a == "--workers")
      cfg.workers = std::stoll(val());
    else if (a == "--batch")
      cfg.batch_size = std::stoll(val());
    else if (a == "--image-size")
      cfg.transform.image_size = std::stoll(val());
    else if (a == "--epochs")
      o.epochs = std::stoll(val());
    else if (a == "--no-shuffle")
      cfg.shuffle = false;
    else if (a == "--hdf5-reads")
      o.sopts.direct_reads = false;
    else if (a == "--no-readahead")
      cfg.readahead = false;
    else if (a == "--readahead-batches")
      cfg.readahead_batches = std::stoll(val());
    else if (a == "--no-coalesce")
      o.sopts.coalesce_reads = false;
    else if (a == "--no-cache")
      o.sopts.cache_bytes = 0;
    else if (a == "--cold")
      o.cold = true;
    else if (a == "--output")
      cfg.transform.output = val() == "uint8" ? hd::OutputType::kUint8 : hd::OutputType::kFloat32;
    else if (a == "--layout")
      cfg.transform.layout = val() == "nhwc" ? hd::Layout::kNHWC : hd::Layout::kNCHW;
    else if (a == "--augment") {
      const std::string v = val();
      cfg.transform.augment = v == "crop_flip"             ? hd::Augment::kCropFlip
                              : v == "random_resized_crop" ? hd::Augment::kRandomResizedCrop
                                                           : hd::Augment::kNone;
    } else {
      std::cerr << "unknown option " << a << "\n";
      return false;
    }
  }
  return true;
}

int load(const std::string& path, int argc, char** argv) {
  LoadOptions o;
  if (!parse_load_options(argc, argv, o)) return 2;
  const hd::LoaderConfig& cfg = o.cfg;
  const hd::SourceOptions& sopts = o.sopts;
  const int64_t epochs = o.epochs;
  const bool cold = o.cold;
  if (cold) evict(path);
  const double t_open = now_s();
  auto src = hd::ImageSource::open({path}, sopts);
  const double open_s = now_s() - t_open;
  hd::Loader loader(src, cfg);
  int64_t images = 0;
  uint64_t checksum = 0;
  const double t0 = now_s();
  for (int64_t e = 0; e < epochs; ++e) {
    loader.start_epoch(e);
    while (auto b = loader.next()) {
      images += b->size;
      checksum += static_cast<const uint8_t*>(b->data())[0];  // touch the batch
    }
  }
  // Opening counts: with caching it includes reading the whole file.
  const double dt = now_s() - t0 + open_s;
  const auto st = loader.stats();
  const auto io = src->io_counters();
  const double in_bytes =
      static_cast<double>(images) * static_cast<double>(src->info().sample_bytes());
  std::printf(
      "mode=load images=%lld seconds=%.4f images_per_s=%.1f input_MBps=%.1f open_s=%.4f "
      "read_s=%.3f transform_s=%.3f workers=%lld augment=%s direct=%d cached=%d io_reads=%lld "
      "io_MB=%.1f checksum=%llu\n",
      static_cast<long long>(images), dt, images / dt, in_bytes / dt / 1e6, open_s, st.read_s,
      st.transform_s, static_cast<long long>(cfg.workers),
      std::string(hpctrain::spec::name_of(cfg.transform.augment)).c_str(),
      src->files()[0].direct ? 1 : 0, src->files()[0].cached ? 1 : 0,
      static_cast<long long>(io.reads), static_cast<double>(io.bytes) / 1e6,
      static_cast<unsigned long long>(checksum));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: bench_loader gen|raw|load|open|randread FILE ...\n";
    return 2;
  }
  const std::string cmd = argv[1], path = argv[2];
  try {
    if (cmd == "gen" && argc >= 6) {
      return gen(path, std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5]),
                 argc >= 7 ? std::stoll(argv[6]) : 0);
    }
    if (cmd == "raw") return raw(path, argc >= 4 && std::string(argv[3]) == "--cold");
    if (cmd == "load") return load(path, argc - 3, argv + 3);
    if (cmd == "randread" && argc >= 5) {
      return randread(path, std::stoll(argv[3]), std::stoll(argv[4]),
                      argc >= 6 && std::string(argv[5]) == "--cold");
    }
    if (cmd == "open") {
      const double t0 = now_s();
      auto src = hd::ImageSource::open({path});
      std::printf("mode=open seconds=%.4f chunk_images=%lld\n", now_s() - t0,
                  static_cast<long long>(src->info().chunk_images));
      return 0;
    }
  } catch (const hpctrain::rt::DataError& e) {
    std::cerr << "bench_loader: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "bad arguments\n";
  return 2;
}
