// Several ranks as threads of one test process: the trainer's Communicator over a plain c10d
// Gloo process group on a FileStore, as c10d's own tests run. Targets using it compile with
// USE_C10D_GLOO and Gloo's headers (tests/unit/dist/CMakeLists.txt).
// on_gloo_ranks() runs one body per rank on its own thread, each with its communicator.
#pragma once

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/communicator.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::test {

// The trainer's Communicator over a plain c10d Gloo process group.
class GlooCommunicator : public dist::Communicator {
 public:
  GlooCommunicator(const std::string& store_file, int rank, int size) : rank_(rank), size_(size) {
    auto store = c10::make_intrusive<c10d::FileStore>(store_file, size);
    auto options = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(60));
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1", /*lazyInit=*/false));
    pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "gloo"; }
  at::Device device() const override { return at::kCPU; }
  std::unique_ptr<dist::Work> all_reduce_async(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    return std::make_unique<GlooWork>(pg_->allreduce(tensors));
  }
  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      pg_->broadcast(one, options)->wait();
    }
  }
  void barrier() override { pg_->barrier()->wait(); }
  void abort() override {}

 private:
  class GlooWork : public dist::Work {
   public:
    explicit GlooWork(c10::intrusive_ptr<c10d::Work> work) : work_(std::move(work)) {}
    void wait() override { work_->wait(); }

   private:
    c10::intrusive_ptr<c10d::Work> work_;
  };

  int rank_, size_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

// c10d's flight recorder (torch 2.11, FlightRecorderDetail.hpp recordWithResetEnabled) inserts a
// process group's status into a shared map before taking its lock: process groups recording at
// once in one process (our thread ranks) corrupt it, a SIGSEGV in
// std::_Rb_tree_insert_and_rebalance or a rank thread spinning for ever inside the recorder (under
// load: train_tests hung in Evaluate.EveryRankCountMatchesOneProcessWhateverTheRemainder; with
// --gtest_repeat on a loaded machine it crashed within 100 repeats). A real job has one process
// group per process. The recorder reads TORCH_FR_BUFFER_SIZE once, when the first process group
// records, which in these binaries may be a test's own one-rank group before any
// on_gloo_ranks(): so it is turned off before main, in every binary that includes this header.
inline const bool kFlightRecorderOff = [] {
  ::setenv("TORCH_FR_BUFFER_SIZE", "0", /*overwrite=*/1);
  return true;
}();

// Runs body(comm) for ranks 0..world-1, each on its own thread with its own GlooCommunicator over
// one FileStore, joins them all, then rethrows the first rank's exception, if any.
template <class Body>
void on_gloo_ranks(int world, Body&& body) {
  const TempDir dir;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        GlooCommunicator comm(dir.file("store"), rank, world);
        body(comm);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace hpctrain::test
