// hpctrain status RUN_DIR [--json]: Slurm state (squeue, then sacct) and what the run directory
// says (run/status.hpp): attempts, restarts and node losses from the ledger, last committed
// checkpoint, latest metrics lines and the training loss trend.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "common/run_layout.hpp"
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
  cmd->callback([args] {
    const fs::path dir = args->run_dir;
    run::require_run_dir(dir);
    nlohmann::json out;
    out["run_dir"] = fs::absolute(dir).lexically_normal().string();
    const auto submission = run::last_submission(dir);
    std::vector<slurm::JobState> states;
    std::string slurm_error;
    if (submission) {
      out["job_id"] = submission->job_id;
      out["submitted_at"] = submission->submitted_at;
      try {
        states = slurm::make_command_client()->query(submission->job_id);
      } catch (const slurm::SlurmError& e) {
        slurm_error = e.what();
      }
    } else {
      out["job_id"] = nullptr;
    }
    out["slurm"] = nlohmann::json::array();
    for (const auto& s : states) {
      out["slurm"].push_back({{"job_id", s.job_id},
                              {"state", s.state},
                              {"reason", s.reason},
                              {"nodes", s.nodes},
                              {"source", s.source}});
    }
    if (!slurm_error.empty()) out["slurm_error"] = slurm_error;
    const bool array = submission && submission->array_tasks > 0;
    if (array) {
      out["tasks"] = nlohmann::json::array();
      for (size_t t = 0; t < submission->array_tasks; ++t) {
        auto d = run::describe_run_dir(dir / layout::task_dir_name(t));
        d["task"] = t;
        out["tasks"].push_back(d);
      }
    } else {
      out.update(run::describe_run_dir(dir));
    }
    if (args->json) {
      std::cout << out.dump(2) << '\n';
      return;
    }
    std::cout << "run:        " << out["run_dir"].get<std::string>() << '\n';
    if (!submission) {
      std::cout << "job:        not submitted\n";
    } else {
      std::cout << "job:        " << submission->job_id << " (submitted "
                << submission->submitted_at << ")\n";
      if (states.empty()) {
        std::cout << "slurm:      "
                  << (slurm_error.empty() ? "unknown to squeue and sacct (finished and purged, or "
                                            "accounting off); see the attempts below"
                                          : "unavailable: " + slurm_error)
                  << '\n';
      }
      for (const auto& s : states) {
        std::cout << "slurm:      " << s.job_id << ' ' << s.state;
        if (!s.reason.empty() && s.reason != "None") std::cout << " (" << s.reason << ')';
        std::cout << " [" << s.source << "]\n";
      }
    }
    if (array) {
      for (const auto& t : out["tasks"]) {
        std::cout << "task " << t["task"].get<size_t>() << ":\n";
        run::print_run_dir(std::cout, t, "  ");
      }
    } else {
      run::print_run_dir(std::cout, out, "");
    }
  });
}

}  // namespace hpctrain::cli
