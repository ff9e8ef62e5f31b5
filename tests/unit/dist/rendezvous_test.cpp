// plan_rendezvous: which host and port the ranks meet at, from the environment alone. MASTER_ADDR
// alone (no MASTER_PORT) in a Slurm step names rank 0's host; the port is still derived.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "dist/ports.hpp"
#include "dist/rendezvous.hpp"

namespace hpctrain::dist {
namespace {

// Rank `rank` of 4 in an srun step of job 77 over localhost and another node.
WorldInfo slurm_step(int rank, const std::string& hostname) {
  WorldInfo w;
  w.source = EnvSource::kSlurm;
  w.rank = rank;
  w.world_size = 4;
  w.nodes = {"localhost", "localhost"};
  w.hostname = hostname;
  w.job_id = "77";
  w.step_id = "0";
  return w;
}

TEST(Rendezvous, SlurmStepMeetsOnTheFirstNodeAtADerivedPort) {
  const auto plan = plan_rendezvous(slurm_step(1, "elsewhere"), {});
  EXPECT_EQ(plan.method, "tcp");
  EXPECT_EQ(plan.host, "localhost");
  EXPECT_EQ(plan.host_source, "first node of the step");
  EXPECT_EQ(plan.port, derive_port("77", "0", ephemeral_port_range()));
  EXPECT_EQ(plan.port_source, "derived from job 77 step 0");
}

TEST(Rendezvous, MasterAddrAloneIsHonouredWithTheDerivedPort) {
  WorldInfo w = slurm_step(1, "elsewhere");
  w.nodes = {"no-such-node.invalid"};  // would not resolve: MASTER_ADDR replaces it
  w.master_addr = "127.0.0.1";
  const auto plan = plan_rendezvous(w, {});
  EXPECT_EQ(plan.method, "tcp");
  EXPECT_EQ(plan.host, "127.0.0.1");
  EXPECT_EQ(plan.host_source, "MASTER_ADDR");
  EXPECT_EQ(plan.port, derive_port("77", "0", ephemeral_port_range()));
  // Rank 0 on a host other than the first node is fine once MASTER_ADDR says where it is.
  WorldInfo r0 = slurm_step(0, "somewhere-else");
  r0.master_addr = "localhost";
  EXPECT_EQ(plan_rendezvous(r0, {}).host, "localhost");
  // With MASTER_PORT too, both are used.
  w.master_port = 29555;
  const auto both = plan_rendezvous(w, {});
  EXPECT_EQ(both.port, 29555);
  EXPECT_EQ(both.port_source, "MASTER_PORT");
}

TEST(Rendezvous, UnresolvableMasterAddrIsNamed) {
  WorldInfo w = slurm_step(1, "elsewhere");
  w.master_addr = "no-such-host.invalid";
  try {
    plan_rendezvous(w, {});
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR 'no-such-host.invalid'"), std::string::npos)
        << e.what();
  }
}

TEST(Rendezvous, HintsSayWhatToSet) {
  // Rank 0 is not on the first node: the hint names MASTER_ADDR and says the port is derived.
  try {
    plan_rendezvous(slurm_step(0, "elsewhere"), {});
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("set MASTER_ADDR to rank 0's host"), std::string::npos) << what;
    EXPECT_NE(what.find("MASTER_PORT"), std::string::npos) << what;
  }
  // Outside Slurm MASTER_ADDR alone is not enough, and the message says both are needed.
  WorldInfo t;
  t.source = EnvSource::kTorchrun;
  t.world_size = 2;
  t.master_addr = "localhost";
  try {
    plan_rendezvous(t, {});
    FAIL() << "no error";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("set MASTER_ADDR and MASTER_PORT"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hpctrain::dist
