// The communicator the trainer needs, and no more: all-reduce (sum), broadcast, barrier, abort,
// rank, size. Backed by c10d's Gloo (CPU) or NCCL (CUDA builds) process groups. Every wait has the
// collective deadline; a failure names the lost ranks and their hosts.
// Thread safety: collectives must be issued in the same order on every rank; issuing from several
// threads needs external ordering (GradSync launches from autograd threads under its own lock).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain::dist {

// An asynchronous collective; wait() rethrows its failure as rt::PeerError.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "gloo" or "nccl"
  virtual at::Device device() const = 0;    // where its tensors must live
  // Sums `tensor` over all ranks in place.
  virtual std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor) = 0;
  void all_reduce(at::Tensor& tensor) { all_reduce_async(tensor)->wait(); }
  // Several tensors in one collective where the backend can (coalesced).
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void barrier() = 0;
  // Ends outstanding collectives so that no rank blocks on a peer that is gone.
  virtual void abort() = 0;
};

}  // namespace hpctrain::dist
