#include "train/restore.hpp"

#include <ATen/ATen.h>

#include "common/error.hpp"

namespace hpctrain::train {
namespace {

void check_sizes(const at::Tensor& saved, const at::Tensor& live, const std::string& what) {
  if (saved.sizes() != live.sizes()) {
    HPCTRAIN_THROW(rt::Error, what + " has shape " + c10::str(saved.sizes()) +
                                  " in the checkpoint, " + c10::str(live.sizes()) + " here");
  }
}

// Strides that differ only where the size is 1 describe the same memory order (torch's rule).
bool same_strides(const at::Tensor& a, const at::Tensor& b) {
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) != 1 && a.stride(d) != b.stride(d)) return false;
  }
  return true;
}

std::string layout_of(const at::Tensor& t) {
  return c10::str(t.device(), " ", t.scalar_type(), " sizes ", t.sizes(), " strides ", t.strides());
}

}  // namespace

at::Tensor restored_like(const at::Tensor& saved, const at::Tensor& live, const std::string& what) {
  check_sizes(saved, live, what);
  at::Tensor out = at::empty_strided(live.sizes(), live.strides(), live.options());
  out.copy_(saved);
  return out;
}

void restore_into(const at::Tensor& live, const at::Tensor& saved, const std::string& what) {
  check_sizes(saved, live, what);
  at::NoGradGuard no_grad;
  live.copy_(saved);
}

void check_fused_inputs(const std::vector<std::vector<at::Tensor>>& lists,
                        const std::vector<std::string>& kinds,
                        const std::vector<std::string>& names) {
  if (lists.empty() || lists[0].empty()) return;
  const at::Tensor& first = lists[0][0];
  for (size_t l = 0; l < lists.size(); ++l) {
    if (lists[l].size() != lists[0].size()) {
      HPCTRAIN_THROW(rt::Error, "fused optimizer step: " + std::to_string(lists[l].size()) + " " +
                                    kinds.at(l) + " tensors for " +
                                    std::to_string(lists[0].size()) + " parameters");
    }
    for (size_t i = 0; i < lists[l].size(); ++i) {
      const at::Tensor& t = lists[l][i];
      const at::Tensor& param = lists[0][i];
      std::string broken;
      if (!t.defined()) {
        broken = "is missing";
      } else if (t.layout() != at::kStrided || !t.is_non_overlapping_and_dense()) {
        broken = "is not one dense block of memory";
      } else if (t.device() != first.device() || t.scalar_type() != first.scalar_type()) {
        broken = "is on " + c10::str(t.device(), " ", t.scalar_type()) + ", the first parameter " +
                 c10::str(first.device(), " ", first.scalar_type());
      } else if (t.sizes() != param.sizes() || !same_strides(t, param)) {
        broken = "is " + layout_of(t) + ", its parameter " + layout_of(param);
      }
      if (broken.empty()) continue;
      const std::string name = i < names.size() ? names[i] : "parameter " + std::to_string(i);
      HPCTRAIN_THROW(rt::Error,
                     "fused optimizer step: the " + kinds.at(l) + " of " + name + " " + broken +
                         "; torch's fused kernels need every state tensor laid out as its "
                         "parameter (on a GPU they refuse it, on the CPU they compute wrong "
                         "updates)");
    }
  }
}

}  // namespace hpctrain::train
