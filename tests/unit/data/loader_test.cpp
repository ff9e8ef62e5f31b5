// Loader: batches independent of the thread count, content matches the sampler, resume mid-epoch
// (same and different world size), errors from worker threads, and the allocator hook.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/error.hpp"
#include "data/loader.hpp"
#include "test_util.hpp"

namespace hpctrain::data {
namespace {

using testing::make_dataset;
using testing::TempDir;

struct Seen {
  std::vector<int64_t> samples, labels;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> sizes;
};

Seen drain(Loader& loader, int64_t max_batches = 1 << 30) {
  Seen s;
  for (int64_t k = 0; k < max_batches; ++k) {
    auto b = loader.next();
    if (!b) break;
    s.samples.insert(s.samples.end(), b->samples.begin(), b->samples.end());
    s.labels.insert(s.labels.end(), b->labels.begin(), b->labels.end());
    const auto* p = static_cast<const uint8_t*>(b->data());
    s.bytes.insert(s.bytes.end(), p, p + b->bytes());
    s.sizes.push_back(b->size);
  }
  return s;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    make_dataset(dir_.file("a.h5"), 150, 12, 12, 3, 10, 16, 0);
    make_dataset(dir_.file("b.h5"), 61, 12, 12, 3, 10, 16, 150);
    // Uncached, so the tests exercise the threaded pread path.
    SourceOptions opts;
    opts.cache_bytes = 0;
    source_ = ImageSource::open({dir_.file("a.h5"), dir_.file("b.h5")}, opts);
  }
  LoaderConfig config(int64_t workers, Augment augment = Augment::kCropFlip) const {
    LoaderConfig c;
    c.batch_size = 16;
    c.workers = workers;
    c.prefetch_batches = 3;
    c.seed = 1234;
    c.transform.augment = augment;
    c.transform.crop_padding = 3;
    return c;
  }
  TempDir dir_;
  std::shared_ptr<ImageSource> source_;
};

TEST_F(LoaderTest, SameBatchesForAnyThreadCount) {
  std::vector<Seen> runs;
  for (int64_t workers : {0, 1, 4}) {
    Loader loader(source_, config(workers));
    Seen all;
    for (int64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      Seen s = drain(loader);
      all.samples.insert(all.samples.end(), s.samples.begin(), s.samples.end());
      all.bytes.insert(all.bytes.end(), s.bytes.begin(), s.bytes.end());
    }
    runs.push_back(std::move(all));
  }
  ASSERT_FALSE(runs[0].bytes.empty());
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].samples, runs[0].samples);
    EXPECT_TRUE(runs[i].bytes == runs[0].bytes) << "run " << i;
  }
}

TEST_F(LoaderTest, BatchesHoldTheShardsPixelsAndLabels) {
  LoaderConfig c = config(3, Augment::kNone);
  c.transform.output = OutputType::kUint8;
  c.transform.layout = Layout::kNHWC;
  c.rank = 1;
  c.world_size = 2;
  Loader loader(source_, c);
  loader.start_epoch(4);
  const Seen s = drain(loader);
  const auto plan = plan_shard(211, 1234, 4, true, TailPolicy::kDrop, 2, 1, 0);
  ASSERT_EQ(s.samples, plan.indices);
  ASSERT_EQ(loader.num_batches(), 7);  // 105 samples in batches of 16
  EXPECT_EQ(s.sizes.back(), 105 - 6 * 16);
  const int64_t sb = 12 * 12 * 3;
  for (size_t i = 0; i < s.samples.size(); ++i) {
    ASSERT_EQ(s.labels[i], testing::label_of(s.samples[i], 10));
    for (int64_t p = 0; p < sb; ++p) {
      ASSERT_EQ(s.bytes[i * sb + p], testing::pixel_value(s.samples[i], p)) << s.samples[i];
    }
  }
  EXPECT_EQ(loader.state().consumed, 210);
  EXPECT_FALSE(loader.next().has_value());
}

TEST_F(LoaderTest, ResumeAtTheSameWorldSizeRepeatsNothingAndSkipsNothing) {
  for (int64_t stop_after : {0, 1, 5, 6}) {
    Loader full(source_, config(2));
    full.start_epoch(3);
    const Seen whole = drain(full);

    Loader first(source_, config(2));
    first.start_epoch(3);
    const Seen before = drain(first, stop_after);
    const LoaderState state = first.state();
    EXPECT_EQ(state.consumed, stop_after * 16);

    Loader resumed(source_, config(3));  // thread count may change too
    resumed.start_epoch(state.epoch, state.consumed);
    const Seen after = drain(resumed);
    std::vector<int64_t> joined = before.samples;
    joined.insert(joined.end(), after.samples.begin(), after.samples.end());
    EXPECT_EQ(joined, whole.samples) << "stop_after=" << stop_after;
    std::vector<uint8_t> bytes = before.bytes;
    bytes.insert(bytes.end(), after.bytes.begin(), after.bytes.end());
    EXPECT_TRUE(bytes == whole.bytes) << "augmentation differs after resume";
  }
}

TEST_F(LoaderTest, ResumeAtADifferentWorldSize) {
  const int64_t n = 211, epoch = 2;
  const auto order = epoch_order(n, 1234, epoch, true);
  // Two ranks train 3 steps of 16 each, then the job restarts with three ranks.
  std::set<int64_t> before;
  int64_t consumed = 0;
  for (int64_t r = 0; r < 2; ++r) {
    LoaderConfig c = config(2);
    c.rank = r;
    c.world_size = 2;
    Loader l(source_, c);
    l.start_epoch(epoch);
    const Seen s = drain(l, 3);
    before.insert(s.samples.begin(), s.samples.end());
    consumed = l.state().consumed;
  }
  ASSERT_EQ(consumed, 96);
  ASSERT_EQ(before, std::set<int64_t>(order.begin(), order.begin() + 96));
  std::multiset<int64_t> after;
  for (int64_t r = 0; r < 3; ++r) {
    LoaderConfig c = config(1);
    c.rank = r;
    c.world_size = 3;
    Loader l(source_, c);
    l.start_epoch(epoch, consumed);
    const Seen s = drain(l);
    after.insert(s.samples.begin(), s.samples.end());
    EXPECT_EQ(l.state().consumed, 96 + (n - 96) / 3 * 3);
  }
  const int64_t kept = (n - 96) / 3 * 3;
  EXPECT_EQ(after, std::multiset<int64_t>(order.begin() + 96, order.begin() + 96 + kept));
  for (int64_t s : after) EXPECT_EQ(before.count(s), 0u) << "repeated " << s;
}

TEST_F(LoaderTest, DropLastBatchAndPadTail) {
  LoaderConfig c = config(2);
  c.drop_last_batch = true;
  c.world_size = 4;
  c.rank = 3;
  c.tail = TailPolicy::kPad;
  Loader l(source_, c);
  l.start_epoch(0);
  EXPECT_EQ(l.num_batches(), 53 / 16);  // ceil(211 / 4) = 53 per rank
  const Seen s = drain(l);
  EXPECT_EQ(s.samples.size(), 48u);
  EXPECT_EQ(l.state().consumed, 48 * 4);
}

TEST_F(LoaderTest, WorkerErrorsReachTheConsumer) {
  const auto path = dir_.file("c.h5");
  make_dataset(path, 100, 12, 12, 3, 10, 16);
  SourceOptions no_cache;
  no_cache.cache_bytes = 0;
  auto src = ImageSource::open({path}, no_cache);
  std::filesystem::resize_file(path, 4096);  // the pixels vanish after open
  for (int64_t workers : {0, 2}) {
    Loader l(src, config(workers));
    l.start_epoch(0);
    try {
      drain(l);
      ADD_FAILURE() << "no error";
    } catch (const rt::DataError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

TEST_F(LoaderTest, AllocatorHookSuppliesAndRecyclesBuffers) {
  std::atomic<int> live{0}, made{0};
  LoaderConfig c = config(2);
  c.allocator.allocate = [&](size_t bytes) {
    ++live;
    ++made;
    return std::malloc(bytes);
  };
  c.allocator.deallocate = [&](void* p, size_t) {
    --live;
    std::free(p);
  };
  {
    Loader l(source_, c);
    for (int64_t epoch = 0; epoch < 3; ++epoch) {
      l.start_epoch(epoch);
      drain(l);
    }
    EXPECT_GT(made.load(), 0);
    EXPECT_LE(made.load(), 8);  // recycled, not one per batch (39 batches)
  }
  EXPECT_EQ(live.load(), 0);
}

TEST_F(LoaderTest, CoalescedReadsGiveTheSameBatchesWithFewerReads) {
  std::vector<Seen> runs;
  std::vector<int64_t> reads;
  for (const bool shuffle : {true, false}) {
    for (const bool coalesce : {true, false}) {
      SourceOptions opts;
      opts.cache_bytes = 0;
      opts.coalesce_reads = coalesce;
      auto src = ImageSource::open({dir_.file("a.h5"), dir_.file("b.h5")}, opts);
      LoaderConfig c = config(2);
      c.shuffle = shuffle;
      c.readahead_batches = coalesce ? 8 : 0;  // the hint window changes nothing either
      Loader l(src, c);
      l.start_epoch(1);
      runs.push_back(drain(l));
      reads.push_back(src->io_counters().reads);
    }
  }
  EXPECT_TRUE(runs[0].bytes == runs[1].bytes);
  EXPECT_TRUE(runs[2].bytes == runs[3].bytes);
  EXPECT_EQ(runs[0].samples, runs[1].samples);
  EXPECT_EQ(reads[1], 211);  // off: one pread per sample
  EXPECT_LT(reads[0], 211);  // shuffled batches of 16 of 211 still hold neighbours
  EXPECT_EQ(reads[3], 211);
  // In order: one read per batch of 16 (14 batches), plus one where a batch crosses into b.h5.
  EXPECT_EQ(reads[2], 15);
}

TEST_F(LoaderTest, RejectsBadConfig) {
  LoaderConfig c = config(2);
  c.batch_size = 0;
  EXPECT_THROW(Loader(source_, c), rt::DataError);
  c = config(2);
  c.rank = 2;
  c.world_size = 2;
  EXPECT_THROW(Loader(source_, c), rt::DataError);
  c = config(2);
  c.readahead_batches = -1;
  EXPECT_THROW(Loader(source_, c), rt::DataError);
}

}  // namespace
}  // namespace hpctrain::data
