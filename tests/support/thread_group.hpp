// Ranks as threads of one process, with the collectives the torch-free parts need: a vote and a
// sum of float slots, each a barrier over every rank. on_thread_ranks() runs one body per rank.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace hpctrain::test {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size) {}

  int size() const { return size_; }

  // Collective: every rank's `n` values summed, written back into each rank's.
  void sum(float* values, size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (arrived_ == 0) sums_.assign(n, 0.0f);
    for (size_t i = 0; i < n; ++i) sums_[i] += values[i];
    const long generation = generation_;
    if (++arrived_ == size_) {
      result_ = sums_;
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return generation_ != generation; });
    }
    for (size_t i = 0; i < n; ++i) values[i] = result_[i];
  }

  // Collective: true on every rank when every rank passed true.
  bool all(bool ok) {
    float v = ok ? 1.0f : 0.0f;
    sum(&v, 1);
    return static_cast<int>(v) == size_;
  }

 private:
  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;                   // guarded by mutex_
  long generation_ = 0;               // guarded by mutex_
  std::vector<float> sums_, result_;  // guarded by mutex_
};

// Runs body(rank, group) for ranks 0..world-1, each on its own thread, joins them all, then
// rethrows the first rank's exception, if any.
template <class Body>
void on_thread_ranks(int world, Body&& body) {
  ThreadGroup group(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, group);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace hpctrain::test
