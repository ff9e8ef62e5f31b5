// hpctrain cancel RUN_DIR: scancel the run's latest submission.
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {

void add_cancel(CLI::App& app) {
  auto run_dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("cancel", "Cancel a run's job");
  cmd->add_option("run_dir", *run_dir, "Run directory")->required();
  cmd->callback([run_dir] {
    const auto submission = run::last_submission(*run_dir);
    if (!submission) {
      throw Exit(kExitFailure,
                 "hpctrain: " + *run_dir + " has no submitted job (submissions.jsonl)");
    }
    slurm::make_command_client()->cancel(submission->job_id);
    std::cerr << "cancelled job " << submission->job_id << '\n';
  });
}

}  // namespace hpctrain::cli
