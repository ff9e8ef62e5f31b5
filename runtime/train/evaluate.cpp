#include "train/evaluate.hpp"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/types.h>

#include <algorithm>

#include "dist/progress.hpp"

namespace hpctrain::train {

EvalResult evaluate(const Forward& forward, const ToDevice& to_device, data::Loader& loader,
                    int64_t num_samples, dist::Communicator& comm) {
  torch::NoGradGuard no_grad;
  loader.start_epoch(0, 0);
  const int64_t rank = comm.rank(), world = comm.size();
  // Rank r reads positions r, r + W, r + 2W, ...; those at or past N are padding.
  const int64_t real = rank < num_samples ? (num_samples - rank + world - 1) / world : 0;
  const auto options = at::TensorOptions().dtype(at::kDouble).device(comm.device());
  at::Tensor totals = at::zeros({4}, options);  // samples, loss sum, top-1, top-5
  int64_t seen = 0;
  while (auto batch = loader.next()) {
    const int64_t keep = std::clamp<int64_t>(real - seen, 0, batch->size);
    seen += batch->size;
    if (keep == 0) continue;  // padding only; the loader still had to produce it
    progress::batch_begins(progress::Phase::kEval);
    auto [images, labels] = to_device(*batch);
    at::Tensor logits = forward(images).narrow(0, 0, keep).to(at::kFloat);
    labels = labels.narrow(0, 0, keep);
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    const at::Tensor top = std::get<1>(logits.topk(k, /*dim=*/1));
    const at::Tensor hits = top.eq(labels.unsqueeze(1));
    namespace F = torch::nn::functional;
    const at::Tensor loss =
        F::cross_entropy(logits, labels, F::CrossEntropyFuncOptions().reduction(torch::kSum));
    totals +=
        at::stack({at::scalar_tensor(static_cast<double>(keep), options), loss.to(at::kDouble),
                   hits.select(1, 0).sum().to(at::kDouble), hits.any(1).sum().to(at::kDouble)});
  }
  comm.all_reduce(totals);
  const at::Tensor t = totals.cpu();
  const auto* v = t.data_ptr<double>();
  EvalResult r;
  r.samples = static_cast<int64_t>(v[0]);
  if (r.samples > 0) {
    r.loss = v[1] / v[0];
    r.top1 = v[2] / v[0];
    r.top5 = v[3] / v[0];
  }
  return r;
}

}  // namespace hpctrain::train
