// Loader: the per-rank training/evaluation data loader. It reads this rank's shard of an
// ImageSource (sampler.hpp), transforms each sample (augment.hpp) and assembles batches ahead of
// the consumer on background threads.
//
// Determinism: batch k of an epoch always holds the same samples with the same augmentation,
// whatever the number of worker threads, because workers claim whole batches by number, every
// random choice is a function of (seed, epoch, sample index), and batches are handed out in
// order. Resume: state() is (epoch, consumed), consumed being the global count of samples of the
// epoch's order consumed by all ranks (per-rank batch x world size per step). Passing it back to
// start_epoch() continues exactly there, also with a different world size.
// Memory: batch buffers come from BufferAllocator (pinned host memory in CUDA builds) and are
// recycled through a pool; at most max(workers, prefetch_batches) batches are claimed by workers
// and not yet handed out.
// Thread safety: one consumer thread calls start_epoch/next/state; the loader owns its workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "data/augment.hpp"
#include "data/sampler.hpp"
#include "data/source.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::data {

// Supplies batch buffers. The CUDA runtime passes cudaHostAlloc/cudaFreeHost here so batches can
// be copied to the device asynchronously; the default uses aligned operator new.
struct BufferAllocator {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* ptr, size_t bytes)> deallocate;
};
BufferAllocator default_allocator();

// Set from the job spec by loader_config_from_spec(); the fields without a spec key keep the
// library's settings below.
struct LoaderConfig {
  int64_t batch_size = 0;        // per rank, >= 1
  int64_t workers = 0;           // background threads; 0 reads on the caller's thread
  int64_t prefetch_batches = 0;  // batches prepared ahead of the consumer, >= 1
  uint64_t seed = 0;
  bool shuffle = true;
  TailPolicy tail = TailPolicy::kDrop;
  bool drop_last_batch = false;  // drop this rank's final short batch
  // Hint each batch's reads to the kernel (posix_fadvise WILLNEED) before reading them, and
  // readahead_batches further batches beyond the one a worker claims, so more reads are in
  // flight than there are workers. Bounded: at most workers + readahead_batches batches are
  // hinted and not yet read. Only uncached pread files are hinted.
  bool readahead = true;
  int64_t readahead_batches = 2;
  int64_t rank = 0, world_size = 1;
  // Encoded (JPEG) datasets: a sample that does not decode stops the loader with an error naming
  // its file and index; with skip_corrupt it is replaced by the first good sample of its batch
  // (image and label) and counted (LoaderStats::corrupt_samples), and on_corrupt, when set, hears
  // what was wrong (from a worker thread).
  bool skip_corrupt = false;
  std::function<void(const std::string& what)> on_corrupt;
  TransformConfig transform;
  BufferAllocator allocator;  // empty: default_allocator()

  // Checks the invariants the loader relies on (not the spec's ranges, which the schema holds);
  // throws rt::DataError naming the first invalid field.
  void validate() const;
};

// The loader of this rank for the training set (train = true: shuffled, augmented, the spec's
// tail policy) or the validation set (in order, the evaluation transform, padded so every sample
// is seen once: the evaluator discards the padding, see Loader::is_padding).
LoaderConfig loader_config_from_spec(const spec::Spec& spec, bool train, int64_t rank,
                                     int64_t world_size);

class BufferPool;

// One per-rank batch. Owns its image buffer (returned to the pool when destroyed).
class Batch {
 public:
  Batch() = default;
  Batch(Batch&&) noexcept;
  Batch& operator=(Batch&&) noexcept;
  ~Batch();

  int64_t epoch = 0;
  int64_t index = 0;  // batch number within this rank's part of the epoch since start_epoch
  int64_t size = 0;   // samples
  int64_t channels = 0, height = 0, width = 0;
  Layout layout = Layout::kNCHW;
  OutputType output = OutputType::kFloat32;
  std::vector<int64_t> labels;   // size entries
  std::vector<int64_t> samples;  // global sample indices, size entries

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // The full batch_size capacity of the buffer, for a fixed-shape device copy.
  size_t capacity() const { return capacity_; }

 private:
  friend class Loader;
  void* data_ = nullptr;
  size_t bytes_ = 0, capacity_ = 0;
  std::shared_ptr<BufferPool> pool_;
};

struct LoaderState {
  int64_t epoch = 0;
  int64_t consumed = 0;
};

// Time spent by the workers, summed over threads; for finding where the time goes.
struct LoaderStats {
  double read_s = 0, transform_s = 0;
  int64_t samples = 0, batches = 0;
  int64_t corrupt_samples = 0;  // skipped (LoaderConfig::skip_corrupt)
};

class Loader {
 public:
  Loader(std::shared_ptr<const ImageSource> source, LoaderConfig config);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Starts (or restarts) reading `epoch` from position `consumed`; discards batches in flight.
  void start_epoch(int64_t epoch, int64_t consumed = 0);
  // The next batch, or nullopt at the end of the epoch. Rethrows a worker's error.
  std::optional<Batch> next();

  LoaderState state() const { return {epoch_.epoch, epoch_.consumed}; }
  // Batches this rank yields in the current epoch from its start position.
  int64_t num_batches() const { return epoch_.num_batches; }
  const Transform& transform() const { return transform_; }
  LoaderStats stats() const;

 private:
  void stop_workers();
  void worker_loop();
  Batch produce(int64_t k, std::vector<uint8_t>& staging, LoaderStats& stats);
  // The transform of an encoded batch's samples into `out`; corrupt samples per skip_corrupt.
  void decode_batch(Batch& batch, uint8_t* out, LoaderStats& stats);
  // Batches to hint when batch k is claimed, [first, second); call with queue_.mu held.
  std::pair<int64_t, int64_t> claim_hints(int64_t k);
  void hint_batches(std::pair<int64_t, int64_t> range) const;

  // The epoch being read: where it stands and this rank's shard of it.
  struct EpochState {
    int64_t epoch = 0;
    int64_t consumed = 0;
    ShardPlan plan;
    int64_t num_batches = 0;
  };
  // What the workers and next() share, under `mu`.
  struct WorkQueue {
    mutable std::mutex mu;
    std::condition_variable work_cv, ready_cv;
    int64_t next_claim = 0;    // next batch number a worker may take
    int64_t next_deliver = 0;  // next batch number next() returns
    int64_t next_hint = 0;     // batches before this one have been hinted
    std::map<int64_t, Batch> ready;
    std::exception_ptr error;
    bool stop = false;
    LoaderStats stats;
  };

  std::shared_ptr<const ImageSource> source_;
  LoaderConfig config_;
  Transform transform_;
  std::shared_ptr<BufferPool> pool_;
  EpochState epoch_;
  WorkQueue queue_;
  std::vector<uint8_t> sync_staging_;  // workers == 0
  std::vector<std::thread> threads_;
};

}  // namespace hpctrain::data
