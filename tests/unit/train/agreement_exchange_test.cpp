// AgreementExchange (runtime/train/agreement_exchange.hpp) over ranks as threads, each with a
// real Gloo process group: the host path's agreement is every rank's slots summed, read at once;
// the device path's (run on the CPU, as HPCTRAIN_GPU_PATH_ON_CPU does) is the same sum, read one
// step late with the step it was gathered at.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "support/gloo_communicator.hpp"
#include "train/agreement_exchange.hpp"

namespace hpctrain::train {
namespace {

using test::GlooCommunicator;
constexpr int kWorld = 3;

// Rank r's contribution at step s: slot i holds (r + 1) * (s + 1) + i, so every sum differs.
std::vector<float> contribution(int rank, int64_t step) {
  std::vector<float> slots(Agreement::kSize);
  for (int i = 0; i < Agreement::kSize; ++i) {
    slots[i] = static_cast<float>((rank + 1) * (step + 1) + i);
  }
  return slots;
}

// The agreement of step s: the sum over the ranks.
std::vector<float> agreed_at(int64_t step) {
  std::vector<float> sum(Agreement::kSize, 0);
  for (int r = 0; r < kWorld; ++r) {
    const auto c = contribution(r, step);
    for (int i = 0; i < Agreement::kSize; ++i) sum[i] += c[i];
  }
  return sum;
}

std::vector<float> values(const Agreed& agreed) {
  return std::vector<float>(agreed.slots, agreed.slots + Agreement::kSize);
}

TEST(AgreementExchange, TheHostPathReadsTheSumAtOnce) {
  test::on_gloo_ranks(kWorld, [&](GlooCommunicator& comm) {
    AgreementExchange exchange(comm, at::kCPU);
    for (int64_t step = 0; step < 3; ++step) {
      const Agreed agreed = exchange.reduce_now(contribution(comm.rank(), step).data(), step);
      ASSERT_NE(agreed.slots, nullptr);
      EXPECT_EQ(values(agreed), agreed_at(step)) << "rank " << comm.rank() << " step " << step;
      EXPECT_EQ(agreed.gathered_at, step);
    }
  });
}

TEST(AgreementExchange, TheDevicePathReadsEachSumAStepLate) {
  test::on_gloo_ranks(kWorld, [&](GlooCommunicator& comm) {
    AgreementExchange exchange(comm, at::kCPU);
    for (int64_t step = 0; step < 4; ++step) {
      at::Tensor agreement = exchange.stage(contribution(comm.rank(), step).data());
      exchange.reduce(agreement);
      exchange.send_home(agreement, step);
      agreement.zero_();  // the device's tensor is reused or freed: the host keeps its copy
      const Agreed agreed = exchange.previous();
      if (step == 0) {
        EXPECT_EQ(agreed.slots, nullptr) << "the first step has nothing to act on";
        continue;
      }
      ASSERT_NE(agreed.slots, nullptr) << "step " << step;
      EXPECT_EQ(values(agreed), agreed_at(step - 1)) << "rank " << comm.rank() << " step " << step;
      EXPECT_EQ(agreed.gathered_at, step - 1);
      EXPECT_EQ(exchange.previous().slots, nullptr) << "acted on once";
    }
  });
}

}  // namespace
}  // namespace hpctrain::train
