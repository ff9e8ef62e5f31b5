#include "dist/grad_sync.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/types.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <vector>

#include "common/error.hpp"
#include "dist/progress.hpp"
#include "spec/spec.hpp"

namespace hpctrain::dist {
namespace {

at::ScalarType wire_type(spec::GradCompression compression, at::ScalarType param_type) {
  switch (compression) {
    case spec::GradCompression::kFp16:
      return at::kHalf;
    case spec::GradCompression::kBf16:
      return at::kBFloat16;
    case spec::GradCompression::kNone:
      break;
  }
  return param_type;
}

}  // namespace

GradSyncOptions grad_sync_options_from_spec(const spec::Spec& spec) {
  GradSyncOptions o;
  o.bucket_mb = spec.train.bucket_mb;
  o.compression = spec.train.grad_compression;
  return o;
}

GradSync::GradSync(std::vector<std::string> names, std::vector<at::Tensor> params,
                   Communicator& comm, GradSyncOptions options)
    : names_(std::move(names)), params_(std::move(params)), comm_(comm), options_(options) {
  if (!(options_.bucket_mb > 0)) {
    HPCTRAIN_THROW(rt::Error, "GradSync: bucket_mb must be > 0");
  }
  if (names_.size() != params_.size()) {
    HPCTRAIN_THROW(rt::Error, "GradSync: " + std::to_string(names_.size()) + " names for " +
                                  std::to_string(params_.size()) + " parameters");
  }
  const auto cap = static_cast<size_t>(options_.bucket_mb * 1024 * 1024);
  bucket_of_.assign(params_.size(), SIZE_MAX);
  ready_.assign(params_.size(), false);
  // Reverse registration order; a new bucket when the cap is reached or dtype/device changes.
  size_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const at::Tensor& p = params_[k];
    if (!p.requires_grad()) continue;
    const size_t nbytes = p.numel() * p.element_size();
    const bool fresh = buckets_.empty() || bytes + nbytes > cap ||
                       params_[buckets_.back().params.front()].scalar_type() != p.scalar_type() ||
                       params_[buckets_.back().params.front()].device() != p.device();
    if (fresh) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(k);
    bucket_of_[k] = buckets_.size() - 1;
    bytes += nbytes;
  }
  for (auto& b : buckets_) {
    int64_t numel = 0;
    for (size_t k : b.params) numel += params_[k].numel();
    const at::Tensor& first = params_[b.params.front()];
    b.flat = torch::zeros(
        {numel}, first.options().dtype(wire_type(options_.compression, first.scalar_type())));
  }
  // Hook each parameter's gradient accumulator: it runs after the gradient is in .grad.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (bucket_of_[k] == SIZE_MAX) continue;
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[k]);
    const uintptr_t key =
        accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, k](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list& /*inputs*/) {
              on_grad_ready(k);
              return outputs;
            }));
    accumulators_.push_back(accumulator);
    hook_keys_.push_back(key);
  }
  prepare();
}

GradSync::~GradSync() {
  // The accumulators belong to the parameters and may outlive this object: remove our hooks.
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    std::static_pointer_cast<torch::autograd::Node>(accumulators_[i])->del_post_hook(hook_keys_[i]);
  }
}

std::vector<std::vector<size_t>> GradSync::bucket_layout() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.params);
  return out;
}

void GradSync::set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  enabled_ = enabled;
}

void GradSync::prepare() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.work.reset();
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_to_launch_ = 0;
}

void GradSync::on_grad_ready(size_t param) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!enabled_ || ready_[param])
    return;  // a second accumulation in the same backward (shared parameter)
  ready_[param] = true;
  Bucket& b = buckets_[bucket_of_[param]];
  --b.pending;
  if (options_.overlap) launch_ready_buckets();
}

void GradSync::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    launch(buckets_[next_to_launch_]);
    ++next_to_launch_;
  }
}

at::Tensor memory_order_view(const at::Tensor& t) {
  if (t.is_contiguous()) return t.view({-1});
  if (!t.is_non_overlapping_and_dense()) return {};
  // The dimensions from the largest stride to the smallest: the order the memory holds them in.
  std::vector<int64_t> order(static_cast<size_t>(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  at::Tensor permuted = t.permute(order);
  return permuted.is_contiguous() ? permuted.view({-1}) : at::Tensor();
}

namespace {

// A gradient's elements as the bucket holds them, and the same view to write them back through.
// Memory order where the memory is one dense block (a channels_last gradient, say): a view, no
// copy. The layout is the same on every rank (every rank's parameters have the same strides).
at::Tensor flat_grad(const at::Tensor& grad) {
  at::Tensor flat = memory_order_view(grad);
  return flat.defined() ? flat : grad.reshape({-1});
}

}  // namespace

void GradSync::launch(Bucket& b) {
  torch::NoGradGuard no_grad;
  const at::Tensor scale = at::scalar_tensor(1.0 / comm_.size(), at::kFloat);
  int64_t offset = 0;
  for (size_t k : b.params) {
    const at::Tensor& grad = params_[k].grad();
    const int64_t n = params_[k].numel();
    // Pre-divide, as DDP does, so fp16 sums cannot overflow; written straight into the bucket.
    at::Tensor slot = b.flat.narrow(0, offset, n);
    at::mul_out(slot, flat_grad(grad), scale.to(grad.scalar_type()));
    offset += n;
  }
  b.work = comm_.all_reduce_async(b.flat);
}

void GradSync::all_reduce_now() {
  bool was_enabled = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    was_enabled = enabled_;
    enabled_ = true;
    for (auto& b : buckets_) {
      b.pending = 0;
      b.work.reset();
    }
    for (size_t k = 0; k < params_.size(); ++k) ready_[k] = bucket_of_[k] != SIZE_MAX;
    next_to_launch_ = 0;
  }
  try {
    finish();
  } catch (...) {
    set_enabled(was_enabled);
    throw;
  }
  set_enabled(was_enabled);
}

void GradSync::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!enabled_) return;
  std::vector<std::string> missing;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (bucket_of_[k] != SIZE_MAX && !ready_[k]) missing.push_back(names_[k]);
  }
  if (!missing.empty()) {
    std::ostringstream names;
    for (size_t i = 0; i < missing.size() && i < 10; ++i) names << (i ? ", " : "") << missing[i];
    if (missing.size() > 10) names << ", ... (" << missing.size() << " in all)";
    HPCTRAIN_THROW(rt::Error, std::to_string(missing.size()) +
                                  " parameter(s) got no gradient in this step: " + names.str() +
                                  "; every parameter that requires grad must take part in the "
                                  "loss (or set requires_grad=false)");
  }
  launch_ready_buckets();  // no-overlap mode, or anything still pending
  lock.unlock();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    progress::enter(progress::Phase::kAllReduce, static_cast<int>(i));
    b.work->wait();
    int64_t offset = 0;
    for (size_t k : b.params) {
      at::Tensor grad = params_[k].mutable_grad();
      const int64_t n = params_[k].numel();
      at::Tensor flat = memory_order_view(grad);
      if (flat.defined()) {
        flat.copy_(b.flat.narrow(0, offset, n));
      } else {
        grad.copy_(b.flat.narrow(0, offset, n).view(grad.sizes()));
      }
      offset += n;
    }
  }
}

void broadcast_from_rank0(Communicator& comm, std::vector<at::Tensor> tensors) {
  torch::NoGradGuard no_grad;
  // Coalesce by dtype into flat buffers: one collective per dtype instead of one per tensor.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_type;
  for (auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, group] : by_type) {
    std::vector<at::Tensor> flat_views;
    for (auto& t : group) flat_views.push_back(t.detach().reshape({-1}));
    std::vector<at::Tensor> flat{torch::cat(flat_views)};
    comm.broadcast(flat, 0);
    int64_t offset = 0;
    for (auto& t : group) {
      t.detach().copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace hpctrain::dist
