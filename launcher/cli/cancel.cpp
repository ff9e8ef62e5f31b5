// hpctrain cancel RUN_DIR: scancel the run's latest submission, unless it has already ended
// (Slurm's state, or the run's ledger where Slurm has forgotten the job): then it says so and exits
// 0 without calling scancel.
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "run/cancel.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {
namespace {

void say_already_ended(const std::string& job_id, const std::string& how) {
  std::cerr << "hpctrain: job " << job_id << " had already ended (" << how
            << "); nothing to cancel\n";
}

}  // namespace

void add_cancel(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "cancel",
      "Cancel a run's job; a job that has already ended is left alone, with a message (exit 0)");
  cmd->add_option("run_dir", *run_dir, "Run directory")->required();
  cmd->callback([run_dir, cmd] {
    if (run_remotely(*cmd, Remote::kRunDir)) return;
    const auto submission = records::last_submission(*run_dir);
    if (!submission) {
      throw Exit(kExitFailure,
                 "hpctrain: " + *run_dir + " has no submitted job (submissions.jsonl)");
    }
    const std::string& id = submission->job_id;
    const auto client = slurm::make_command_client();
    std::vector<slurm::JobState> states;
    try {
      states = client->query(id);
    } catch (const slurm::SlurmUnreachable&) {
      throw;
    } catch (const slurm::SlurmError&) {
      // squeue failed for another reason: scancel decides.
    }
    const auto attempts = submission->array_tasks > 0 ? std::vector<records::Attempt>{}
                                                      : records::read_attempts(*run_dir);
    if (const auto ended = run::job_already_ended(id, states, attempts)) {
      say_already_ended(id, *ended);
      return;
    }
    try {
      client->cancel(id);
    } catch (const slurm::SlurmError& e) {
      // It ended between the query and scancel.
      if (!run::is_already_ended_message(e.what())) throw;
      say_already_ended(id, "scancel: " + std::string(e.what()));
      return;
    }
    std::cerr << "cancelled job " << id << '\n';
  });
}

}  // namespace hpctrain::cli
