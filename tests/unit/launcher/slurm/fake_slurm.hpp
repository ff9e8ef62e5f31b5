// The one Slurm of the unit tests: it answers every SlurmClient call from its members, records the
// calls that change something, and fails any call on demand, refused (SlurmError) or with no
// controller answering (SlurmUnreachable), as the command client would. The supervisor's tests
// and the run commands' (logs --follow) use it.
// Thread safety: none; one test's.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "slurm/client.hpp"

namespace hpctrain::test {

class FakeSlurm : public slurm::SlurmClient {
 public:
  enum class Failure { kRefused, kUnreachable };

  // Answers. Every job is in `state` (reason `reason`, on `nodes`); an empty state: no job is
  // known.
  std::string state = "RUNNING", reason, nodes;
  std::vector<std::string> allocation;  // scontrol show hostnames, whatever the list
  std::optional<int> port = 6818;       // SlurmdPort
  std::vector<slurm::PartitionInfo> partition_list;
  slurm::Accounting accounts;
  std::optional<std::string> next_job = "8";  // what sbatch answers; nullopt: it refuses
  std::optional<bool> requeue_flag = true;    // scontrol show job's Requeue=
  std::function<void(const std::string&)> on_kill_step;

  // Calls that fail, by method name ("requeue", "query", "partitions", ...).
  std::map<std::string, Failure> failing;
  // The calls that change something, in order: "submit SCRIPT [after=JOB] [export=VARS]
  // [exclude=LIST]", "cancel JOB", "requeue JOB", "exclude JOB LIST", "kill STEP", "signal JOB
  // SIG", "requeue_allowed JOB", "run_in_job JOB NODE ARGV...".
  std::vector<std::string> calls;

  // A partition of `count` nodes (without GPUs), the default one when `is_default`.
  void add_partition(const std::string& name, int64_t count, bool is_default = false) {
    slurm::PartitionInfo p;
    p.name = name;
    p.is_default = is_default;
    p.availability = "up";
    p.groups.push_back({count, 0, "(null)"});
    partition_list.push_back(p);
  }

  std::string submit(const std::filesystem::path& script, const slurm::SubmitOptions& o) override {
    std::string call = "submit " + script.filename().string();
    if (!o.after.empty()) call += " after=" + o.after;
    for (const auto& var : o.export_env) call += " export=" + var;
    if (!o.exclude.empty()) call += " exclude=" + o.exclude;
    calls.push_back(call);
    fail_if("submit");
    if (!next_job) throw slurm::SlurmError("sbatch failed (status 1): fake: refused");
    return *next_job;
  }
  std::vector<slurm::JobState> query(const std::string& job_id) override {
    fail_if("query");
    if (state.empty()) return {};
    return {{job_id, state, reason, nodes, "squeue"}};
  }
  std::vector<slurm::JobState> query_all(const std::vector<std::string>& job_ids) override {
    fail_if("query_all");
    std::vector<slurm::JobState> out;
    for (const auto& id : job_ids) {
      if (!state.empty()) out.push_back({id, state, reason, nodes, "squeue"});
    }
    return out;
  }
  void cancel(const std::string& job_id) override {
    calls.push_back("cancel " + job_id);
    fail_if("cancel");
  }
  void requeue(const std::string& job_id) override {
    calls.push_back("requeue " + job_id);
    fail_if("requeue");
  }
  void exclude_nodes(const std::string& job_id, const std::string& list) override {
    calls.push_back("exclude " + job_id + " " + list);
    fail_if("exclude_nodes");
  }
  void signal(const std::string& job_id, const std::string& sig) override {
    calls.push_back("signal " + job_id + " " + sig);
    fail_if("signal");
  }
  std::optional<bool> requeue_allowed(const std::string& job_id) override {
    calls.push_back("requeue_allowed " + job_id);
    fail_if("requeue_allowed");
    return requeue_flag;
  }
  common::CommandResult run_in_job(const std::string& job_id, const std::string& node,
                                   const std::vector<std::string>& argv) override {
    std::string call = "run_in_job " + job_id + " " + node;
    for (const auto& a : argv) call += " " + a;
    calls.push_back(call);
    fail_if("run_in_job");
    common::CommandResult r;
    r.exit_status = 0;
    return r;
  }
  std::vector<std::string> step_ids(const std::string& job_id) override {
    fail_if("step_ids");
    return {job_id + ".0"};
  }
  void kill_step(const std::string& step_id) override {
    calls.push_back("kill " + step_id);
    if (on_kill_step) on_kill_step(step_id);
  }
  std::vector<std::string> hostnames(const std::string&) override {
    fail_if("hostnames");
    return allocation;
  }
  std::optional<int> slurmd_port() override {
    fail_if("slurmd_port");
    return port;
  }
  std::vector<slurm::PartitionInfo> partitions() override {
    fail_if("partitions");
    return partition_list;
  }
  slurm::Accounting accounting(const std::string& user) override {
    slurm::Accounting a = accounts;
    a.user = user;
    return a;
  }

  // Every call fails as `how` says.
  void fail_all(Failure how) {
    for (const char* name :
         {"submit", "query", "query_all", "cancel", "requeue", "exclude_nodes", "signal",
          "requeue_allowed", "run_in_job", "step_ids", "hostnames", "slurmd_port", "partitions"}) {
      failing[name] = how;
    }
  }

 private:
  void fail_if(const std::string& method) const {
    const auto it = failing.find(method);
    if (it == failing.end()) return;
    if (it->second == Failure::kUnreachable) {
      throw slurm::SlurmUnreachable("no Slurm controller was reachable (fake: " + method + ")");
    }
    throw slurm::SlurmError("fake: " + method + " refused");
  }
};

}  // namespace hpctrain::test
