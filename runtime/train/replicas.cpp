#include "train/replicas.hpp"

#include <torch/torch.h>

#include <iostream>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "dist/grad_sync.hpp"
#include "model/weights.hpp"

namespace hpctrain::train {

uint64_t weights_fingerprint(const torch::nn::Module& model) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a, over the state dict's bytes in order
  for (const auto& item : model::state_dict(model)) {
    const at::Tensor t = item.value().detach().contiguous().cpu();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    const size_t n = static_cast<size_t>(t.numel()) * t.element_size();
    for (size_t i = 0; i < n; ++i) {
      hash ^= bytes[i];
      hash *= 0x100000001b3ULL;
    }
  }
  return hash;
}

void sync_buffers(torch::nn::Module& model, dist::Communicator& comm) {
  std::vector<at::Tensor> buffers;
  for (auto& b : model.buffers()) buffers.push_back(b);
  if (!buffers.empty()) dist::broadcast_from_rank0(comm, buffers);
}

uint64_t verify_identical_weights(const torch::nn::Module& model, dist::Communicator& comm,
                                  std::optional<int64_t> evaluated_at) {
  const uint64_t mine = weights_fingerprint(model);
  const std::string what =
      evaluated_at ? "weights evaluated at step " + std::to_string(*evaluated_at) : "final weights";
  std::cerr << rt::rank_prefix() << what << " fnv1a64 " << std::hex << "0x" << mine << std::dec
            << std::endl;
  // The communicator sums: each rank fills its own slot of a zero vector.
  at::Tensor all =
      at::zeros({comm.size()}, at::TensorOptions().dtype(at::kLong).device(comm.device()));
  all[comm.rank()] = static_cast<int64_t>(mine);
  comm.all_reduce(all);
  const at::Tensor host = all.cpu();
  std::string differ;
  for (int64_t r = 1; r < comm.size(); ++r) {
    if (host[r].item<int64_t>() != host[0].item<int64_t>()) differ += " " + std::to_string(r);
  }
  if (!differ.empty()) {
    HPCTRAIN_THROW(rt::Error, "the ranks' " + what + " differ: rank(s)" + differ +
                                  " disagree with rank 0 (non-deterministic kernels, or a bug)");
  }
  return mine;
}

double max_over_ranks(double value, dist::Communicator& comm) {
  at::Tensor all =
      at::zeros({comm.size()}, at::TensorOptions().dtype(at::kDouble).device(comm.device()));
  all[comm.rank()] = value;
  comm.all_reduce(all);
  return all.max().item<double>();
}

}  // namespace hpctrain::train
