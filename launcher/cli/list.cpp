// hpctrain list [ROOT] [--json]: every run directory under ROOT, one line each, with its Slurm
// state from one squeue (and one sacct) call for all of them. ROOT defaults to the current
// directory: job.run_dir is required in every spec and no profile may set it, so there is no
// site-wide run root to default to.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "run/listing.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {

void add_list(CLI::App& app) {
  namespace fs = std::filesystem;
  struct Args {
    std::string root = ".";
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "list",
      "List the runs under a directory: Slurm state, progress, top-1, restarts, checkpoint age");
  cmd->add_option("root", args->root,
                  "Directory searched for run directories (folders with spec.toml and "
                  "job.sbatch). Default: the current directory; there is no site-wide run root, "
                  "since every spec names its own job.run_dir");
  cmd->add_flag("--json", args->json, "One JSON object instead of a table");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kRunDir)) return;
    const fs::path root = args->root;
    std::vector<fs::path> dirs;
    try {
      dirs = run::find_run_dirs(root);
    } catch (const run::RunDirError& e) {
      throw Exit(kExitFailure, std::string("hpctrain: list: ") + e.what());
    }
    std::vector<std::string> job_ids;
    const auto entries = run::list_entries(dirs, job_ids);
    std::vector<slurm::JobState> states;
    std::string slurm_error;
    try {
      states = slurm::make_command_client({std::chrono::milliseconds(30000)})->query_all(job_ids);
    } catch (const slurm::SlurmError& e) {
      slurm_error = e.what();
    }
    const nlohmann::json out = run::list_rows(root, entries, states, slurm_error);
    if (args->json) {
      std::cout << out.dump(2) << '\n';
      return;
    }
    if (!slurm_error.empty()) {
      std::cerr << "hpctrain: list: Slurm was not reachable (" << slurm_error
                << "); states from the runs' ledgers where they ended, else unknown\n";
    }
    for (const auto& r : out["runs"]) {
      if (r.contains("spec_error")) {
        std::cerr << "hpctrain: list: " << r["name"].get<std::string>()
                  << ": its spec does not load (progress totals unknown): "
                  << r["spec_error"].get<std::string>() << '\n';
      }
    }
    if (entries.empty()) {
      std::cerr << "hpctrain: list: no run directories under " << out["root"].get<std::string>()
                << '\n';
      return;
    }
    run::print_list(std::cout, out);
  });
}

}  // namespace hpctrain::cli
