// Runtime pieces that need libtorch but one process: the communicator at world size 1 and the
// errors' rank context. GradSync's tests are in tests/unit/dist/grad_sync_test.cpp.
#include <gtest/gtest.h>
#include <signal.h>

#include <torch/torch.h>

#include "common/error.hpp"
#include "dist/process_group.hpp"

namespace hpctrain::dist {
namespace {

std::unique_ptr<ProcessGroup> single() {
  WorldInfo w;
  w.hostname = "localhost";
  return join(w, {}, {});
}

TEST(Communicator, WorldSizeOneCollectives) {
  auto group = single();
  auto& comm = group->communicator();
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(group->plan().method, "local");
  auto t = torch::arange(10, torch::kFloat32);
  comm.all_reduce(t);
  EXPECT_TRUE(t.equal(torch::arange(10, torch::kFloat32)));
  std::vector<torch::Tensor> b{torch::ones({3})};
  comm.broadcast(b, 0);
  EXPECT_TRUE(b[0].equal(torch::ones({3})));
  comm.barrier();
}

TEST(Errors, CarryRankHostAndPlace) {
  rt::set_rank_context(3, 16, "node017");
  try {
    HPCTRAIN_THROW(rt::PeerError, "lost rank 5 (node018)");
  } catch (const rt::PeerError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[rank 3/16 node017] runtime_test.cpp:", 0), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace hpctrain::dist
