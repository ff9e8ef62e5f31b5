#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.hpp"
#include "dist/world.hpp"

namespace hpctrain::dist {
namespace {

// Rank 5 of 8 in an srun step over node[01-03] (2, 2 and 4 tasks): node 2, local rank 1.
EnvMap srun_step() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", "5"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_STEP_NUM_TASKS", "8"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "2"},
          {"SLURM_STEP_NODELIST", "node[01-03]"},
          {"SLURM_JOB_NODELIST", "node[01-04]"},
          {"SLURM_STEP_NUM_NODES", "3"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2),4"},
          {"SLURM_TASKS_PER_NODE", "2(x2),4,1"}};
}

// What a batch script (no srun) sees: Slurm sets SLURM_PROCID=0 for the batch step too.
EnvMap batch_script() {
  return {{"SLURM_JOB_ID", "4242"},
          {"SLURM_PROCID", "0"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "0"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_JOB_NODELIST", "node[01-02]"},
          {"SLURM_TASKS_PER_NODE", "4(x2)"}};
}

EnvMap with(EnvMap env, std::initializer_list<std::pair<const std::string, std::string>> set,
            std::initializer_list<std::string> unset = {}) {
  for (const auto& [name, value] : set) env[name] = value;
  for (const auto& name : unset) env.erase(name);
  return env;
}

void expect_error_naming(const EnvMap& env, const std::vector<std::string>& names,
                         const std::string& context) {
  try {
    const WorldInfo world = detect_world(env, "node99");
    ADD_FAILURE() << context << ": no rt::EnvError; got " << to_json(world);
  } catch (const rt::EnvError& e) {
    for (const std::string& name : names) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos)
          << context << ": message does not name " << name << ": " << e.what();
    }
  }
}

TEST(World, SingleProcess) {
  const WorldInfo world = detect_world({{"HOME", "/root"}}, "laptop");
  EXPECT_EQ(world.source, EnvSource::kSingle);
  EXPECT_EQ(world.rank, 0);
  EXPECT_EQ(world.world_size, 1);
  EXPECT_EQ(world.local_world_size, 1);
  EXPECT_EQ(world.num_nodes, 1);
  EXPECT_EQ(world.hostname, "laptop");
  EXPECT_TRUE(world.nodes.empty());
  EXPECT_TRUE(world.job_id.empty());
  EXPECT_FALSE(world.job_end_time);
  EXPECT_FALSE(world.pmix);
}

TEST(World, SrunStep) {
  const WorldInfo world = detect_world(with(srun_step(), {{"SLURM_ARRAY_JOB_ID", "4200"},
                                                          {"SLURM_ARRAY_TASK_ID", "7"},
                                                          {"SLURM_RESTART_COUNT", "2"},
                                                          {"SLURM_JOB_END_TIME", "1750000000"},
                                                          {"MASTER_ADDR", "node01"},
                                                          {"MASTER_PORT", "29500"},
                                                          {"PMIX_RANK", "5"},
                                                          {"PMIX_NAMESPACE", "slurm.pmix.4242.0"}}),
                                       "node03");
  EXPECT_EQ(world.source, EnvSource::kSlurm);
  EXPECT_EQ(world.rank, 5);
  EXPECT_EQ(world.world_size, 8);
  EXPECT_EQ(world.local_rank, 1);
  EXPECT_EQ(world.local_world_size, 4);
  EXPECT_EQ(world.node_index, 2);
  EXPECT_EQ(world.num_nodes, 3);
  EXPECT_EQ(world.nodes, (std::vector<std::string>{"node01", "node02", "node03"}));
  EXPECT_EQ(world.job_id, "4242");
  EXPECT_EQ(world.step_id, "0");
  EXPECT_EQ(world.array_job_id, "4200");
  EXPECT_EQ(world.array_task_id, "7");
  EXPECT_EQ(world.restart_count, 2);
  EXPECT_EQ(world.job_end_time, 1750000000);
  EXPECT_EQ(world.master_addr, "node01");
  EXPECT_EQ(world.master_port, 29500);
  EXPECT_TRUE(world.pmix);
  EXPECT_EQ(world.pmix_rank, 5);
}

TEST(World, SrunStepFallbacks) {
  // SLURM_NTASKS alone, the job's node list and tasks per node, no node count.
  const WorldInfo world = detect_world(with(srun_step(),
                                            {{"SLURM_PROCID", "6"},
                                             {"SLURM_LOCALID", "2"},
                                             {"SLURM_NODEID", "1"},
                                             {"SLURM_JOB_NODELIST", "node[01-02]"},
                                             {"SLURM_TASKS_PER_NODE", "4(x2)"}},
                                            {"SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                                             "SLURM_STEP_NUM_NODES", "SLURM_STEP_TASKS_PER_NODE"}),
                                       "node02");
  EXPECT_EQ(world.source, EnvSource::kSlurm);
  EXPECT_EQ(world.rank, 6);
  EXPECT_EQ(world.world_size, 8);
  EXPECT_EQ(world.local_world_size, 4);
  EXPECT_EQ(world.node_index, 1);
  EXPECT_EQ(world.num_nodes, 2);
  EXPECT_EQ(world.nodes, (std::vector<std::string>{"node01", "node02"}));
}

TEST(World, Torchrun) {
  const WorldInfo one = detect_world({{"RANK", "3"},
                                      {"WORLD_SIZE", "4"},
                                      {"LOCAL_RANK", "3"},
                                      {"LOCAL_WORLD_SIZE", "4"},
                                      {"MASTER_ADDR", "127.0.0.1"},
                                      {"MASTER_PORT", "29500"}},
                                     "box");
  EXPECT_EQ(one.source, EnvSource::kTorchrun);
  EXPECT_EQ(one.rank, 3);
  EXPECT_EQ(one.world_size, 4);
  EXPECT_EQ(one.local_rank, 3);
  EXPECT_EQ(one.node_index, 0);
  EXPECT_EQ(one.num_nodes, 1);
  EXPECT_EQ(one.master_port, 29500);

  const WorldInfo multi = detect_world({{"RANK", "13"},
                                        {"WORLD_SIZE", "16"},
                                        {"LOCAL_RANK", "1"},
                                        {"LOCAL_WORLD_SIZE", "4"},
                                        {"GROUP_RANK", "3"}},
                                       "box");
  EXPECT_EQ(multi.node_index, 3);
  EXPECT_EQ(multi.num_nodes, 4);
  EXPECT_EQ(multi.local_world_size, 4);
}

TEST(World, OpenMpi) {
  const WorldInfo one = detect_world({{"OMPI_COMM_WORLD_RANK", "2"},
                                      {"OMPI_COMM_WORLD_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_NODE_RANK", "2"}},
                                     "box");
  EXPECT_EQ(one.source, EnvSource::kOpenMpi);
  EXPECT_EQ(one.rank, 2);
  EXPECT_EQ(one.world_size, 4);
  EXPECT_EQ(one.local_rank, 2);
  EXPECT_EQ(one.local_world_size, 4);
  EXPECT_EQ(one.node_index, 0);  // not OMPI_COMM_WORLD_NODE_RANK: that is a per-node rank
  EXPECT_EQ(one.num_nodes, 1);
}

// mpirun and torchrun inside an sbatch script: the Slurm variables describe the batch step
// (SLURM_PROCID=0 for everyone), so the launcher's ranks win and are not cross-checked.
TEST(World, LauncherInsideBatchScriptWins) {
  const WorldInfo mpi = detect_world(with(batch_script(), {{"OMPI_COMM_WORLD_RANK", "5"},
                                                           {"OMPI_COMM_WORLD_SIZE", "8"},
                                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                           {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
                                     "node02.cluster.example");
  EXPECT_EQ(mpi.source, EnvSource::kOpenMpi);
  EXPECT_EQ(mpi.rank, 5);
  EXPECT_EQ(mpi.node_index, 1);  // node02 in SLURM_JOB_NODELIST
  EXPECT_EQ(mpi.num_nodes, 2);
  EXPECT_EQ(mpi.job_id, "4242");

  const WorldInfo torch = detect_world(with(batch_script(), {{"RANK", "6"},
                                                             {"WORLD_SIZE", "8"},
                                                             {"LOCAL_RANK", "2"},
                                                             {"LOCAL_WORLD_SIZE", "4"},
                                                             {"GROUP_RANK", "1"}}),
                                       "node02");
  EXPECT_EQ(torch.source, EnvSource::kTorchrun);
  EXPECT_EQ(torch.rank, 6);
  EXPECT_EQ(torch.node_index, 1);
  EXPECT_EQ(torch.nodes, (std::vector<std::string>{"node01", "node02"}));
}

// `srun --ntasks-per-node=1 torchrun --nproc-per-node=4`: srun's ranks count agents, torchrun's
// count workers; the worlds differ in size so the ranks are not compared.
TEST(World, TorchrunUnderSrunOneTaskPerNode) {
  const WorldInfo world = detect_world(with(srun_step(), {{"SLURM_PROCID", "1"},
                                                          {"SLURM_NTASKS", "2"},
                                                          {"SLURM_STEP_NUM_TASKS", "2"},
                                                          {"SLURM_LOCALID", "0"},
                                                          {"SLURM_NODEID", "1"},
                                                          {"SLURM_STEP_NODELIST", "node[01-02]"},
                                                          {"SLURM_STEP_NUM_NODES", "2"},
                                                          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                                                          {"RANK", "6"},
                                                          {"WORLD_SIZE", "8"},
                                                          {"LOCAL_RANK", "2"},
                                                          {"LOCAL_WORLD_SIZE", "4"},
                                                          {"GROUP_RANK", "1"},
                                                          {"PMIX_RANK", "1"}}),
                                       "node02");
  EXPECT_EQ(world.source, EnvSource::kTorchrun);
  EXPECT_EQ(world.rank, 6);
  EXPECT_EQ(world.nodes, (std::vector<std::string>{"node01", "node02"}));
}

TEST(World, RankMustAgreeAcrossLaunchersOfTheSameWorld) {
  // A wrapper that exports RANK=0 in every task of an 8-task srun step: two rank-0s.
  expect_error_naming(with(srun_step(), {{"RANK", "0"},
                                         {"WORLD_SIZE", "8"},
                                         {"LOCAL_RANK", "1"},
                                         {"LOCAL_WORLD_SIZE", "4"},
                                         {"GROUP_RANK", "1"}}),
                      {"RANK=0", "SLURM_PROCID=5"}, "RANK vs SLURM_PROCID");
  expect_error_naming(with(srun_step(), {{"OMPI_COMM_WORLD_RANK", "4"},
                                         {"OMPI_COMM_WORLD_SIZE", "8"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
                      {"OMPI_COMM_WORLD_RANK=4", "SLURM_PROCID=5"}, "OMPI vs SLURM_PROCID");
  expect_error_naming(with(srun_step(), {{"PMIX_RANK", "4"}, {"PMIX_NAMESPACE", "x"}}),
                      {"PMIX_RANK=4", "SLURM_PROCID=5"}, "PMIX_RANK vs SLURM_PROCID");
  expect_error_naming({{"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "2"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                       {"PMIX_RANK", "0"}},
                      {"PMIX_RANK=0", "OMPI_COMM_WORLD_RANK=1"}, "PMIX_RANK vs mpirun");
  expect_error_naming({{"PMIX_RANK", "3"}}, {"PMIX_RANK=3"}, "PMIX_RANK in a single process");
}

TEST(World, BatchScriptWithoutSrunIsAnError) {
  expect_error_naming(batch_script(), {"SLURM_JOB_ID", "SLURM_STEP_ID", "srun"}, "batch");
  for (const char* step : {"batch", "extern", "4294967294", "4294967295", "interactive"}) {
    expect_error_naming(with(batch_script(), {{"SLURM_STEP_ID", step}}), {"SLURM_STEP_ID", "srun"},
                        step);
  }
  expect_error_naming(with(srun_step(), {}, {"SLURM_PROCID"}), {"SLURM_PROCID", "srun"},
                      "step without SLURM_PROCID");
  expect_error_naming({{"SLURM_JOB_ID", "1"}}, {"srun"}, "salloc shell");
  expect_error_naming({{"SLURM_PROCID", "3"}}, {"SLURM_PROCID", "SLURM_JOB_ID"}, "stray PROCID");
}

TEST(World, MalformedSlurmVariables) {
  for (const char* bad : {"abc", "-1", "1x", "", " 1", "+1", "1.0", "99999999999999999999"}) {
    expect_error_naming(with(srun_step(), {{"SLURM_PROCID", bad}}), {"SLURM_PROCID"}, bad);
  }
  const struct {
    std::string name, value;
    std::vector<std::string> named;
  } cases[] = {
      {"SLURM_PROCID", "8", {"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}},
      {"SLURM_NTASKS", "0", {"SLURM_NTASKS"}},
      {"SLURM_NTASKS", "7", {"SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"}},
      {"SLURM_LOCALID", "4", {"SLURM_LOCALID", "SLURM_STEP_TASKS_PER_NODE"}},
      {"SLURM_LOCALID", "x", {"SLURM_LOCALID"}},
      {"SLURM_NODEID", "3", {"SLURM_NODEID"}},
      {"SLURM_STEP_NUM_NODES", "2", {"SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES"}},
      {"SLURM_STEP_NUM_NODES", "0", {"SLURM_STEP_NUM_NODES"}},
      {"SLURM_STEP_TASKS_PER_NODE",
       "2(x2),3",
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS"}},
      {"SLURM_STEP_TASKS_PER_NODE", "2(x3", {"SLURM_STEP_TASKS_PER_NODE"}},
      {"SLURM_STEP_TASKS_PER_NODE", "2(3),2", {"SLURM_STEP_TASKS_PER_NODE"}},
      {"SLURM_STEP_TASKS_PER_NODE", "4(x2)", {"SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_NODES"}},
      {"SLURM_STEP_TASKS_PER_NODE", "", {"SLURM_STEP_TASKS_PER_NODE"}},
      {"SLURM_STEP_NODELIST", "node[3-1]", {"SLURM_STEP_NODELIST"}},
      {"SLURM_STEP_NODELIST", "node[1-3", {"SLURM_STEP_NODELIST", "node[1-3"}},
      {"SLURM_STEP_NODELIST", "node[1-3],", {"SLURM_STEP_NODELIST", "node[1-3],"}},
      {"SLURM_JOB_ID", "12a", {"SLURM_JOB_ID"}},
      {"SLURM_STEP_ID", "zero", {"SLURM_STEP_ID"}},
      {"SLURM_ARRAY_TASK_ID", "-1", {"SLURM_ARRAY_TASK_ID"}},
      {"SLURM_ARRAY_JOB_ID", "x", {"SLURM_ARRAY_JOB_ID"}},
      {"SLURM_RESTART_COUNT", "once", {"SLURM_RESTART_COUNT"}},
      {"SLURM_JOB_END_TIME", "soon", {"SLURM_JOB_END_TIME"}},
      {"MASTER_PORT", "0", {"MASTER_PORT"}},
      {"MASTER_PORT", "65536", {"MASTER_PORT"}},
      {"MASTER_PORT", "29500x", {"MASTER_PORT"}},
      {"MASTER_ADDR", "", {"MASTER_ADDR"}},
      {"PMIX_RANK", "r", {"PMIX_RANK"}},
  };
  for (const auto& c : cases) {
    EnvMap env = srun_step();
    env[c.name] = c.value;
    expect_error_naming(env, c.named, c.name + "=" + c.value);
  }
  // Without a step list the job's is read, and its variable is the one named.
  expect_error_naming(
      with(srun_step(), {{"SLURM_JOB_NODELIST", "node1-3]"}}, {"SLURM_STEP_NODELIST"}),
      {"SLURM_JOB_NODELIST", "node1-3]"}, "malformed job node list");
  for (const char* missing : {"SLURM_LOCALID", "SLURM_NODEID"}) {
    expect_error_naming(with(srun_step(), {}, {missing}), {missing}, missing);
  }
  expect_error_naming(with(srun_step(), {}, {"SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"}),
                      {"SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"}, "no task count");
  expect_error_naming(with(srun_step(), {}, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}),
                      {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, "no tasks per node");
}

TEST(World, MalformedTorchrunVariables) {
  const EnvMap good = {{"RANK", "5"},
                       {"WORLD_SIZE", "8"},
                       {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "4"},
                       {"GROUP_RANK", "1"}};
  ASSERT_NO_THROW(detect_world(good, "h"));
  expect_error_naming(with(good, {}, {"WORLD_SIZE"}), {"WORLD_SIZE"}, "no WORLD_SIZE");
  expect_error_naming(with(good, {}, {"RANK"}), {"RANK"}, "no RANK");
  expect_error_naming(with(good, {}, {"LOCAL_RANK"}), {"LOCAL_RANK"}, "no LOCAL_RANK");
  expect_error_naming(with(good, {}, {"LOCAL_WORLD_SIZE"}), {"LOCAL_WORLD_SIZE"}, "no LWS");
  expect_error_naming(with(good, {}, {"GROUP_RANK"}), {"GROUP_RANK"}, "no GROUP_RANK");
  expect_error_naming(with(good, {{"RANK", "8"}}), {"RANK", "WORLD_SIZE"}, "RANK=8");
  expect_error_naming(with(good, {{"RANK", "five"}}), {"RANK"}, "RANK=five");
  expect_error_naming(with(good, {{"WORLD_SIZE", "0"}}), {"WORLD_SIZE"}, "WORLD_SIZE=0");
  expect_error_naming(with(good, {{"LOCAL_RANK", "4"}}), {"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
                      "LOCAL_RANK=4");
  expect_error_naming(with(good, {{"LOCAL_WORLD_SIZE", "3"}}), {"WORLD_SIZE", "LOCAL_WORLD_SIZE"},
                      "8 % 3");
  expect_error_naming(with(good, {{"GROUP_RANK", "2"}}), {"GROUP_RANK"}, "GROUP_RANK=2");
  expect_error_naming({{"LOCAL_RANK", "0"}}, {"LOCAL_RANK", "RANK"}, "LOCAL_RANK alone");
}

TEST(World, MalformedOpenMpiVariables) {
  const EnvMap good = {{"OMPI_COMM_WORLD_RANK", "1"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  ASSERT_NO_THROW(detect_world(good, "h"));
  expect_error_naming(with(good, {{"OMPI_COMM_WORLD_RANK", "4"}}),
                      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, "rank 4 of 4");
  expect_error_naming(with(good, {}, {"OMPI_COMM_WORLD_SIZE"}), {"OMPI_COMM_WORLD_SIZE"},
                      "no size");
  expect_error_naming(with(good, {}, {"OMPI_COMM_WORLD_LOCAL_SIZE"}),
                      {"OMPI_COMM_WORLD_LOCAL_SIZE"}, "no local size");
  expect_error_naming(with(good, {{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}}),
                      {"OMPI_COMM_WORLD_LOCAL_RANK"}, "local rank x");
  expect_error_naming(with(good, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "5"}}),
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"}, "local > world");
  // Several nodes, and this host is not in the allocation: the node index is unknown.
  EnvMap outside = batch_script();
  for (const auto& [name, value] : good) outside[name] = value;
  outside["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  expect_error_naming(outside, {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_JOB_NODELIST"},
                      "host not listed");
  expect_error_naming(with(good, {{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                      {"OMPI_COMM_WORLD_LOCAL_SIZE"}, "no node list");
}

TEST(World, Json) {
  const WorldInfo world = detect_world(with(srun_step(), {{"MASTER_PORT", "29500"}}), "node03");
  const auto j = nlohmann::json::parse(to_json(world));
  EXPECT_EQ(j.at("source"), "slurm");
  EXPECT_EQ(j.at("rank"), 5);
  EXPECT_EQ(j.at("world_size"), 8);
  EXPECT_EQ(j.at("local_rank"), 1);
  EXPECT_EQ(j.at("local_world_size"), 4);
  EXPECT_EQ(j.at("node_index"), 2);
  EXPECT_EQ(j.at("num_nodes"), 3);
  EXPECT_EQ(j.at("nodes"), nlohmann::json({"node01", "node02", "node03"}));
  EXPECT_EQ(j.at("hostname"), "node03");
  EXPECT_EQ(j.at("job_id"), "4242");
  EXPECT_EQ(j.at("step_id"), "0");
  EXPECT_EQ(j.at("array_job_id"), "");
  EXPECT_EQ(j.at("array_task_id"), "");
  EXPECT_EQ(j.at("restart_count"), 0);
  EXPECT_TRUE(j.at("job_end_time").is_null());
  EXPECT_TRUE(j.at("master_addr").is_null());
  EXPECT_EQ(j.at("master_port"), 29500);
  EXPECT_EQ(j.at("pmix"), false);
  EXPECT_EQ(to_json(world).find('\n'), std::string::npos);
}

// Every rank's host from the step's node list and tasks per node, as srun lays the tasks out:
// in blocks by default, round robin with SLURM_DISTRIBUTION=cyclic; nothing where the layout is
// not one of those or this rank's own place disagrees with it.
TEST(World, RankHostsDerivedFromTheStep) {
  using V = std::vector<std::string>;
  const V block = {"node01", "node01", "node02", "node02", "node03", "node03", "node03", "node03"};
  EXPECT_EQ(derive_rank_hosts(detect_world(srun_step(), "node03")), block);
  EXPECT_EQ(derive_rank_hosts(detect_world(
                with(srun_step(), {{"SLURM_DISTRIBUTION", "block:cyclic"}}), "node03")),
            block);
  const V cyclic = {"node01", "node02", "node03", "node01", "node02", "node03", "node03", "node03"};
  EXPECT_EQ(derive_rank_hosts(
                detect_world(with(srun_step(), {{"SLURM_DISTRIBUTION", "cyclic"}}), "node03")),
            cyclic);
  // A plane or arbitrary layout is not derived; nor is one this rank's place contradicts.
  EXPECT_TRUE(derive_rank_hosts(
                  detect_world(with(srun_step(), {{"SLURM_DISTRIBUTION", "plane=2"}}), "node03"))
                  .empty());
  EXPECT_TRUE(derive_rank_hosts(
                  detect_world(with(srun_step(), {{"SLURM_DISTRIBUTION", "arbitrary"}}), "node03"))
                  .empty());
  EXPECT_TRUE(derive_rank_hosts(detect_world(with(srun_step(), {{"SLURM_LOCALID", "0"}}), "node03"))
                  .empty());
  // torchrun names no nodes.
  EXPECT_TRUE(
      derive_rank_hosts(
          detect_world(
              {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"}},
              "node03"))
          .empty());
}

TEST(World, CurrentEnvironment) {
  ASSERT_EQ(setenv("HPCTRAIN_DIST_TEST_VAR", "a=b", 1), 0);
  const EnvMap env = current_environment();
  ASSERT_TRUE(env.count("HPCTRAIN_DIST_TEST_VAR"));
  EXPECT_EQ(env.at("HPCTRAIN_DIST_TEST_VAR"), "a=b");
  unsetenv("HPCTRAIN_DIST_TEST_VAR");
}

}  // namespace
}  // namespace hpctrain::dist
