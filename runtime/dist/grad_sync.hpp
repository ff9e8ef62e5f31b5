// Data-parallel gradient synchronisation as PyTorch DDP does it: parameters grouped into buckets
// (bucket_mb each) in reverse registration order, since backward produces gradients roughly in
// that order; a bucket's all-reduce is launched from the autograd hooks as soon as all its
// gradients are accumulated, so communication overlaps the rest of backward. Buckets are launched
// strictly in index order, so every rank issues the same collectives in the same order whatever
// order its hooks fire in. finish() waits for them (with the collective deadline) and writes the
// averaged gradients back. Optional fp16/bf16 compression of the all-reduce.
// Thread safety: hooks run on autograd threads and take the internal lock; prepare() and finish()
// are called from the training thread, around backward().
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "spec/choices.hpp"

namespace hpctrain::spec {
struct Spec;
}

namespace hpctrain::dist {

struct GradSyncOptions {
  double bucket_mb = 0;  // > 0
  spec::GradCompression compression = spec::GradCompression::kNone;
  bool overlap = true;  // false: all-reduce every bucket after backward (for comparison)
};
// [train] bucket_mb and grad_compression.
GradSyncOptions grad_sync_options_from_spec(const spec::Spec& spec);

// `t`'s elements in the order its memory holds them, as a flat view of its storage (no copy), when
// that memory is one dense block (contiguous, channels_last, any permutation); otherwise an
// undefined tensor.
at::Tensor memory_order_view(const at::Tensor& t);

class GradSync {
 public:
  // `names` and `params` in registration order (module.named_parameters()); only parameters that
  // require grad take part.
  GradSync(std::vector<std::string> names, std::vector<at::Tensor> params, Communicator& comm,
           GradSyncOptions options);
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Before each backward(): resets the per-step state.
  void prepare();
  // After backward(): launches what is left, waits for every bucket, writes averaged gradients
  // into each parameter's .grad. Throws rt::Error naming parameters that got no gradient.
  void finish();

  // Without backward's hooks (the static step, whose backward may be a CUDA graph's replay, which
  // runs no hook): all-reduces every bucket now, in index order, and writes the averaged
  // gradients back, as finish() after a backward does; works whether enabled or not.
  void all_reduce_now();

  // Off: backward's hooks and finish() do nothing and every rank keeps its own gradients (the
  // local steps of local SGD, train/local_sgd.hpp). Call between steps, before prepare().
  void set_enabled(bool enabled);
  bool enabled() const { return enabled_; }

  size_t bucket_count() const { return buckets_.size(); }
  // Parameter indices of each bucket (registration indices), for tests.
  std::vector<std::vector<size_t>> bucket_layout() const;

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    at::Tensor flat;             // the bucket's buffer (compressed dtype when compressing)
    size_t pending = 0;          // gradients not yet ready this step
    std::unique_ptr<Work> work;
  };

  void on_grad_ready(size_t param);  // from the autograd hook
  void launch_ready_buckets();       // lock held
  void launch(Bucket& bucket);       // lock held

  std::vector<std::string> names_;
  std::vector<at::Tensor> params_;
  Communicator& comm_;
  GradSyncOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // param index -> bucket index
  std::vector<bool> ready_;
  size_t next_to_launch_ = 0;
  bool enabled_ = true;
  std::mutex mutex_;
  std::vector<std::shared_ptr<void>> accumulators_;  // keeps the hooked grad accumulators alive
  std::vector<uintptr_t> hook_keys_;                 // our hook in each, for removal
};

// Broadcasts every tensor from rank 0 (parameters and buffers at start).
void broadcast_from_rank0(Communicator& comm, std::vector<at::Tensor> tensors);

}  // namespace hpctrain::dist
