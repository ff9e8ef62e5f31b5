// Several ranks as threads of one test process: the trainer's Communicator over a plain c10d
// Gloo process group on a FileStore, as c10d's own tests run. Targets using it compile with
// USE_C10D_GLOO and Gloo's headers (tests/unit/dist/CMakeLists.txt).
// Set TORCH_FR_BUFFER_SIZE=0 before the first group: c10d's flight recorder (torch 2.11) is not
// safe with several process groups recording at once in one process.
#pragma once

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.hpp"

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

}  // namespace hpctrain::test
