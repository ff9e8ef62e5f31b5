#include "data/loader.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "common/time.hpp"
#include "spec/spec.hpp"

namespace hpctrain::data {

namespace {
constexpr size_t kBufferAlignment = 64;
}  // namespace

BufferAllocator default_allocator() {
  return {
      [](size_t bytes) { return ::operator new(bytes, std::align_val_t(kBufferAlignment)); },
      [](void* p, size_t /*bytes*/) { ::operator delete(p, std::align_val_t(kBufferAlignment)); }};
}

// Recycles batch buffers of one size: pinned allocations are slow, so they are made once.
class BufferPool {
 public:
  BufferPool(BufferAllocator allocator, size_t bytes)
      : allocator_(std::move(allocator)), bytes_(bytes) {}
  ~BufferPool() {
    for (void* p : free_) allocator_.deallocate(p, bytes_);
  }
  void* acquire() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        void* p = free_.back();
        free_.pop_back();
        return p;
      }
    }
    void* p = allocator_.allocate(bytes_);
    if (p == nullptr) {
      HPCTRAIN_THROW(rt::DataError,
                     "batch buffer allocation of " + std::to_string(bytes_) + " bytes failed");
    }
    return p;
  }
  void release(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(p);
  }
  size_t bytes() const { return bytes_; }

 private:
  BufferAllocator allocator_;
  size_t bytes_;
  std::mutex mu_;
  std::vector<void*> free_;
};

Batch::Batch(Batch&& o) noexcept { *this = std::move(o); }

Batch& Batch::operator=(Batch&& o) noexcept {
  if (this != &o) {
    if (pool_ && data_ != nullptr) pool_->release(data_);
    epoch = o.epoch;
    index = o.index;
    size = o.size;
    channels = o.channels;
    height = o.height;
    width = o.width;
    layout = o.layout;
    output = o.output;
    labels = std::move(o.labels);
    samples = std::move(o.samples);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = o.bytes_;
    capacity_ = o.capacity_;
    pool_ = std::move(o.pool_);
  }
  return *this;
}

Batch::~Batch() {
  if (pool_ && data_ != nullptr) pool_->release(data_);
}

void LoaderConfig::validate() const {
  auto bad = [](const std::string& what) { HPCTRAIN_THROW(rt::DataError, "data loader: " + what); };
  if (batch_size < 1) bad("batch_size must be >= 1, got " + std::to_string(batch_size));
  if (workers < 0) bad("workers must be >= 0, got " + std::to_string(workers));
  if (prefetch_batches < 1) {
    bad("prefetch_batches must be >= 1, got " + std::to_string(prefetch_batches));
  }
  if (readahead_batches < 0) {
    bad("readahead_batches must be >= 0, got " + std::to_string(readahead_batches));
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    bad("rank " + std::to_string(rank) + " outside world size " + std::to_string(world_size));
  }
  if (static_cast<bool>(allocator.allocate) != static_cast<bool>(allocator.deallocate)) {
    bad("allocator needs both allocate and deallocate");
  }
}

LoaderConfig loader_config_from_spec(const spec::Spec& spec, bool train, int64_t rank,
                                     int64_t world_size) {
  LoaderConfig c;
  c.batch_size = spec.train.batch_size;
  c.workers = spec.data.workers;
  c.prefetch_batches = spec.data.prefetch_batches;
  c.seed = static_cast<uint64_t>(spec.train.seed);
  c.shuffle = train;
  c.tail = train ? spec.data.shard_tail : TailPolicy::kPad;
  // A short last batch would make training steps of different sizes (and a batch of one breaks
  // batch norm); evaluation reads everything.
  c.drop_last_batch = train;
  c.rank = rank;
  c.world_size = world_size;
  c.skip_corrupt = spec.data.skip_corrupt;
  c.transform.augment = spec.data.augment;
  c.transform.train = train;
  c.transform.crop_padding = spec.data.crop_padding;
  c.transform.image_size = spec.data.image_size.value_or(0);
  c.transform.layout = spec.train.channels_last ? Layout::kNHWC : Layout::kNCHW;
  return c;
}

namespace {
const LoaderConfig& validated(const LoaderConfig& c) {
  c.validate();
  return c;
}
}  // namespace

Loader::Loader(std::shared_ptr<const ImageSource> source, LoaderConfig config)
    : source_(std::move(source)),
      config_(validated(config)),
      transform_(config_.transform, source_->info()) {
  if (!config_.allocator.allocate) config_.allocator = default_allocator();
  pool_ =
      std::make_shared<BufferPool>(config_.allocator, transform_.sample_output_bytes() *
                                                          static_cast<size_t>(config_.batch_size));
}

Loader::~Loader() { stop_workers(); }

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(queue_.mu);
    queue_.stop = true;
  }
  queue_.work_cv.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
  std::lock_guard<std::mutex> lock(queue_.mu);
  queue_.stop = false;
  queue_.ready.clear();
  queue_.error = nullptr;
}

void Loader::start_epoch(int64_t epoch, int64_t consumed) {
  stop_workers();
  epoch_.plan = plan_shard(source_->size(), config_.seed, epoch, config_.shuffle, config_.tail,
                           config_.world_size, config_.rank, consumed);
  epoch_.epoch = epoch;
  epoch_.consumed = consumed;
  const int64_t b = config_.batch_size;
  epoch_.num_batches =
      config_.drop_last_batch ? epoch_.plan.per_rank / b : (epoch_.plan.per_rank + b - 1) / b;
  queue_.next_claim = 0;
  queue_.next_deliver = 0;
  queue_.next_hint = 0;
  for (int64_t i = 0; i < config_.workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

void Loader::worker_loop() {
  std::vector<uint8_t> staging;
  const int64_t ahead = std::max(config_.prefetch_batches, config_.workers);
  for (;;) {
    int64_t k = 0;
    std::pair<int64_t, int64_t> hints;
    {
      std::unique_lock<std::mutex> lock(queue_.mu);
      queue_.work_cv.wait(lock, [&] {
        return queue_.stop || (queue_.next_claim < epoch_.num_batches &&
                               queue_.next_claim < queue_.next_deliver + ahead);
      });
      if (queue_.stop) return;
      k = queue_.next_claim++;
      hints = claim_hints(k);
    }
    LoaderStats local;
    try {
      hint_batches(hints);
      Batch batch = produce(k, staging, local);
      std::lock_guard<std::mutex> lock(queue_.mu);
      queue_.ready.emplace(k, std::move(batch));
      queue_.stats.read_s += local.read_s;
      queue_.stats.transform_s += local.transform_s;
      queue_.stats.samples += local.samples;
      queue_.stats.corrupt_samples += local.corrupt_samples;
      queue_.stats.batches += 1;
    } catch (...) {
      std::lock_guard<std::mutex> lock(queue_.mu);
      if (!queue_.error) queue_.error = std::current_exception();
    }
    queue_.ready_cv.notify_all();
  }
}

Batch Loader::produce(int64_t k, std::vector<uint8_t>& staging, LoaderStats& stats) {
  const int64_t b = config_.batch_size;
  const int64_t begin = k * b;
  const int64_t end = std::min(begin + b, epoch_.plan.per_rank);
  const int64_t n = end - begin;
  const DatasetInfo& info = source_->info();
  const auto sb = static_cast<size_t>(info.sample_bytes());
  const size_t out_sb = transform_.sample_output_bytes();

  Batch batch;
  batch.epoch = epoch_.epoch;
  batch.index = k;
  batch.size = n;
  batch.channels = transform_.channels();
  batch.height = transform_.out_height();
  batch.width = transform_.out_width();
  batch.layout = config_.transform.layout;
  batch.output = config_.transform.output;
  batch.samples.assign(epoch_.plan.indices.begin() + begin, epoch_.plan.indices.begin() + end);
  batch.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    batch.labels[static_cast<size_t>(i)] =
        source_->labels()[static_cast<size_t>(batch.samples[static_cast<size_t>(i)])];
  }
  batch.pool_ = pool_;
  batch.data_ = pool_->acquire();
  batch.capacity_ = pool_->bytes();
  batch.bytes_ = out_sb * static_cast<size_t>(n);

  if (source_->encoded()) {
    decode_batch(batch, static_cast<uint8_t*>(batch.data_), stats);
    return batch;
  }
  // One call for the whole batch: the source sorts the byte ranges and coalesces nearby ones.
  auto t0 = std::chrono::steady_clock::now();
  staging.resize(sb * static_cast<size_t>(n));
  source_->read_samples(batch.samples.data(), n, staging.data());
  stats.read_s += seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  auto* out = static_cast<uint8_t*>(batch.data_);
  for (int64_t i = 0; i < n; ++i) {
    transform_.apply(staging.data() + static_cast<size_t>(i) * sb, config_.seed, epoch_.epoch,
                     batch.samples[static_cast<size_t>(i)], out + static_cast<size_t>(i) * out_sb);
  }
  stats.transform_s += seconds_since(t0);
  stats.samples += n;
  return batch;
}

void Loader::decode_batch(Batch& batch, uint8_t* out, LoaderStats& stats) {
  thread_local std::vector<uint8_t> bytes;
  thread_local std::vector<size_t> starts;
  const int64_t n = batch.size;
  const size_t out_sb = transform_.sample_output_bytes();
  auto t0 = std::chrono::steady_clock::now();
  source_->read_encoded(batch.samples.data(), n, bytes, starts);
  stats.read_s += seconds_since(t0);

  t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> corrupt;
  int64_t good = -1;
  for (int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<size_t>(i);
    const int64_t sample = batch.samples[at];
    try {
      transform_.apply_jpeg(bytes.data() + starts[at], starts[at + 1] - starts[at], config_.seed,
                            epoch_.epoch, sample, out + at * out_sb);
      if (good < 0) good = i;
    } catch (const JpegError& e) {
      const std::string what = source_->sample_name(sample) + ": " + e.message();
      if (!config_.skip_corrupt) {
        HPCTRAIN_THROW(rt::DataError, what + " ([data] skip_corrupt = true skips such samples)");
      }
      if (config_.on_corrupt) config_.on_corrupt(what);
      corrupt.push_back(i);
    }
  }
  if (!corrupt.empty()) {
    if (good < 0) {
      HPCTRAIN_THROW(rt::DataError, "every sample of batch " + std::to_string(batch.index) +
                                        " is corrupt, the first " +
                                        source_->sample_name(batch.samples.front()));
    }
    const auto g = static_cast<size_t>(good);
    for (const int64_t i : corrupt) {
      const auto at = static_cast<size_t>(i);
      std::memcpy(out + at * out_sb, out + g * out_sb, out_sb);
      batch.labels[at] = batch.labels[g];
    }
    stats.corrupt_samples += static_cast<int64_t>(corrupt.size());
  }
  stats.transform_s += seconds_since(t0);
  stats.samples += n;
}

std::pair<int64_t, int64_t> Loader::claim_hints(int64_t k) {
  if (!config_.readahead) return {0, 0};
  const int64_t first = std::max(queue_.next_hint, k);
  const int64_t last = std::min(epoch_.num_batches, k + 1 + config_.readahead_batches);
  queue_.next_hint = std::max(queue_.next_hint, last);
  return {first, std::max(first, last)};
}

void Loader::hint_batches(std::pair<int64_t, int64_t> range) const {
  const int64_t b = config_.batch_size;
  for (int64_t k = range.first; k < range.second; ++k) {
    const int64_t begin = k * b;
    const int64_t end = std::min(begin + b, epoch_.plan.per_rank);
    if (begin < end) source_->will_need_samples(epoch_.plan.indices.data() + begin, end - begin);
  }
}

std::optional<Batch> Loader::next() {
  if (queue_.next_deliver >= epoch_.num_batches) return std::nullopt;
  Batch batch;
  if (config_.workers == 0) {
    std::vector<uint8_t>& staging = sync_staging_;
    LoaderStats local;
    std::pair<int64_t, int64_t> hints;
    {
      std::lock_guard<std::mutex> lock(queue_.mu);
      hints = claim_hints(queue_.next_deliver);
    }
    hint_batches(hints);
    batch = produce(queue_.next_deliver, staging, local);
    std::lock_guard<std::mutex> lock(queue_.mu);
    queue_.stats.read_s += local.read_s;
    queue_.stats.transform_s += local.transform_s;
    queue_.stats.samples += local.samples;
    queue_.stats.corrupt_samples += local.corrupt_samples;
    queue_.stats.batches += 1;
    ++queue_.next_deliver;
  } else {
    std::unique_lock<std::mutex> lock(queue_.mu);
    queue_.ready_cv.wait(
        lock, [&] { return queue_.error || queue_.ready.count(queue_.next_deliver) > 0; });
    auto it = queue_.ready.find(queue_.next_deliver);
    if (it == queue_.ready.end()) std::rethrow_exception(queue_.error);
    batch = std::move(it->second);
    queue_.ready.erase(it);
    ++queue_.next_deliver;
    lock.unlock();
    queue_.work_cv.notify_all();
  }
  epoch_.consumed += batch.size * config_.world_size;
  return batch;
}

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(queue_.mu);
  return queue_.stats;
}

}  // namespace hpctrain::data
