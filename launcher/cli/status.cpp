// hpctrain status RUN_DIR [--json]: Slurm state (squeue, then sacct) and what the run directory
// says (run/status.hpp): attempts, restarts and node losses from the ledger, last committed
// checkpoint, latest metrics lines, the training loss trend and the goodput ledger.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "run/run_dir.hpp"
#include "run/status.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {

void add_status(CLI::App& app) {
  namespace fs = std::filesystem;
  struct Args {
    std::string run_dir;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("status", "Show a run's job state, attempts and progress");
  cmd->add_option("run_dir", args->run_dir, "Run directory")->required();
  cmd->add_flag("--json", args->json, "One JSON object instead of text");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kRunDir)) return;
    const fs::path dir = args->run_dir;
    run::require_run_dir(dir);
    // The run directory read once; Slurm asked about its last submission.
    // The spec for the goodput ledger's node-hours.
    const run::Snapshot snapshot = run::read_snapshot(dir, {/*spec=*/true, /*tasks=*/true});
    const auto& submission = snapshot.submission;
    std::vector<slurm::JobState> states;
    std::string slurm_error;
    if (submission) {
      try {
        states = slurm::make_command_client()->query(submission->job_id);
      } catch (const slurm::SlurmError& e) {
        slurm_error = e.what();
      }
    }
    const nlohmann::json out = run::status_report(snapshot, states, slurm_error);
    if (args->json) {
      std::cout << out.dump(2) << '\n';
      return;
    }
    run::print_status(std::cout, out);
  });
}

}  // namespace hpctrain::cli
