#include "train/agreement_exchange.hpp"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

#include <cstring>

namespace hpctrain::train {

AgreementExchange::AgreementExchange(dist::Communicator& comm, const at::Device& device)
    : comm_(comm), device_(device) {}

Agreed AgreementExchange::reduce_now(const float* slots, int64_t step) {
  at::Tensor agreement =
      torch::from_blob(const_cast<float*>(slots), {Agreement::kSize}, torch::kFloat32).clone();
  comm_.all_reduce(agreement);
  std::memcpy(agreed_, agreement.data_ptr<float>(), sizeof agreed_);
  return {agreed_, step};
}

at::Tensor AgreementExchange::stage(const float* slots) const {
  const auto host_options = at::TensorOptions().dtype(at::kFloat).pinned_memory(device_.is_cuda());
  at::Tensor staged = at::empty({Agreement::kSize}, host_options);
  std::memcpy(staged.data_ptr<float>(), slots, sizeof(float) * Agreement::kSize);
  // The host allocator keeps a pinned block until the copies queued from it are done.
  return staged.to(device_, /*non_blocking=*/true, /*copy=*/true);
}

void AgreementExchange::send_home(const at::Tensor& agreement, int64_t step) {
  const bool cuda = device_.is_cuda();
  InFlight next;
  next.values =
      at::empty({Agreement::kSize}, at::TensorOptions().dtype(at::kFloat).pinned_memory(cuda));
  next.values.copy_(agreement, /*non_blocking=*/cuda);
  if (cuda) {
    next.copied = std::make_shared<c10::Event>(device_.type());
    next.copied->record(c10::impl::VirtualGuardImpl(device_.type()).getStream(device_));
  }
  in_flight_.push(std::move(next), step);
}

Agreed AgreementExchange::previous() {
  auto ready = in_flight_.take();
  if (!ready) return {};
  if (ready->value.copied) ready->value.copied->synchronize();  // the copy queued a step ago
  std::memcpy(agreed_, ready->value.values.data_ptr<float>(), sizeof agreed_);
  return {agreed_, ready->gathered_at};
}

}  // namespace hpctrain::train
