// hpctrain list [ROOT] [--json]: every run directory under ROOT, one line each, with its Slurm
// state from one squeue (and one sacct) call for all of them. ROOT defaults to the current
// directory: job.run_dir is required in every spec and no profile may set it, so there is no
// site-wide run root to default to.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "run/listing.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;

std::string list_age(int64_t seconds) {
  if (seconds < 0) seconds = 0;
  if (seconds < 120) return std::to_string(seconds) + "s";
  if (seconds < 2 * 3600) return std::to_string(seconds / 60) + "m";
  if (seconds < 2 * 86400) return std::to_string(seconds / 3600) + "h";
  return std::to_string(seconds / 86400) + "d";
}

// "700/2000" with train.max_steps; "700 (epoch 2/3)" without, since the launcher does not know
// the steps per epoch (they depend on the dataset's size); "-" before the first train line.
std::string list_progress(const nlohmann::json& r) {
  std::string out = r["step"].is_null() ? "-" : std::to_string(r["step"].get<int64_t>());
  if (!r["max_steps"].is_null()) return out + "/" + std::to_string(r["max_steps"].get<int64_t>());
  if (!r["epoch"].is_null() && !r["epochs"].is_null()) {
    out += " (epoch " + std::to_string(r["epoch"].get<int64_t>()) + "/" +
           std::to_string(r["epochs"].get<int64_t>()) + ")";
  }
  return out;
}

nlohmann::json list_row(const fs::path& root, const fs::path& dir, const std::string& job_id,
                        std::optional<size_t> task) {
  const auto s = run::summarize_run(dir);
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  std::string name = dir.lexically_relative(root).string();
  if (name.empty()) name = ".";
  nlohmann::json r = {{"name", name},
                      {"run_dir", fs::absolute(dir).lexically_normal().string()},
                      {"job_id", job_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(job_id)},
                      {"task", opt(task)},
                      {"step", opt(s.step)},
                      {"epoch", opt(s.epoch)},
                      {"max_steps", opt(s.max_steps)},
                      {"epochs", opt(s.epochs)},
                      {"top1", opt(s.top1)},
                      {"attempts", s.attempts},
                      {"restarts", s.restarts},
                      {"checkpoint_step", opt(s.checkpoint_step)},
                      {"checkpoint_age_s", opt(s.checkpoint_age_s)}};
  if (!s.spec_error.empty()) r["spec_error"] = s.spec_error;
  const auto attempts = run::read_attempts(dir);
  r["last_reason"] =
      attempts.empty() ? nlohmann::json(nullptr) : nlohmann::json(attempts.back().reason);
  return r;
}

}  // namespace

void add_list(CLI::App& app) {
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
  cmd->callback([args] {
    const fs::path root = args->root;
    std::vector<fs::path> dirs;
    try {
      dirs = run::find_run_dirs(root);
    } catch (const run::RunDirError& e) {
      throw Exit(kExitFailure, std::string("hpctrain: list: ") + e.what());
    }
    // One row per plain run, one per task of an array run (its task-NNN folders).
    struct Pending {
      fs::path dir;
      std::string job_id;  // the row's Slurm id: "123", or "123_4" for task 4
      std::optional<size_t> task;
      bool submitted = false;
    };
    std::vector<Pending> rows;
    std::vector<std::string> job_ids;
    for (const auto& dir : dirs) {
      const auto submission = run::last_submission(dir);
      if (submission) job_ids.push_back(submission->job_id);
      const auto tasks = run::array_task_dirs(dir);
      if (tasks.empty()) {
        rows.push_back({dir, submission ? submission->job_id : "", std::nullopt, bool(submission)});
      }
      for (const auto& [t, task_dir] : tasks) {
        rows.push_back({task_dir, submission ? submission->job_id + "_" + std::to_string(t) : "", t,
                        bool(submission)});
      }
    }
    std::map<std::string, slurm::JobState> states;
    std::string slurm_error;
    try {
      for (auto& s :
           slurm::make_command_client({std::chrono::milliseconds(30000)})->query_all(job_ids)) {
        states[s.job_id] = s;
      }
    } catch (const slurm::SlurmError& e) {
      slurm_error = e.what();
    }
    nlohmann::json out = {{"root", fs::absolute(root).lexically_normal().string()},
                          {"runs", nlohmann::json::array()}};
    if (!slurm_error.empty()) out["slurm_error"] = slurm_error;
    for (const auto& p : rows) {
      auto r = list_row(root, p.dir, p.job_id, p.task);
      std::string state;
      if (!p.submitted) {
        state = "unsubmitted";
      } else if (!slurm_error.empty()) {
        state = "unknown";
      } else if (auto it = states.find(p.job_id); it != states.end()) {
        state = it->second.state;
        r["state_source"] = it->second.source;
      } else {
        // Neither squeue nor sacct knows it (purged, accounting off): the ledger's last word.
        state = r["last_reason"].is_null() ? "unknown"
                                           : "ledger:" + r["last_reason"].get<std::string>();
        r["state_source"] = r["last_reason"].is_null() ? nullptr : nlohmann::json("ledger");
      }
      r["state"] = state;
      out["runs"].push_back(r);
    }
    if (args->json) {
      std::cout << out.dump(2) << '\n';
      return;
    }
    if (!slurm_error.empty())
      std::cerr << "hpctrain: list: Slurm state unknown: " << slurm_error << '\n';
    for (const auto& r : out["runs"]) {
      if (r.contains("spec_error")) {
        std::cerr << "hpctrain: list: " << r["name"].get<std::string>()
                  << ": its spec does not load (progress totals unknown): "
                  << r["spec_error"].get<std::string>() << '\n';
      }
    }
    if (rows.empty()) {
      std::cerr << "hpctrain: list: no run directories under " << out["root"].get<std::string>()
                << '\n';
      return;
    }
    size_t name_width = 4;
    for (const auto& r : out["runs"])
      name_width = std::max(name_width, r["name"].get<std::string>().size());
    auto pad = [](std::string s, size_t width) {
      if (s.size() < width) s.append(width - s.size(), ' ');
      return s;
    };
    std::cout << pad("RUN", name_width) << "  " << pad("STATE", 16) << "  " << pad("STEP", 18)
              << "  " << pad("TOP-1", 7) << "  " << pad("RESTARTS", 8) << "  CHECKPOINT\n";
    for (const auto& r : out["runs"]) {
      std::string top1 = "-";
      if (!r["top1"].is_null()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f%%", r["top1"].get<double>() * 100);
        top1 = buf;
      }
      std::string checkpoint = "none";
      if (!r["checkpoint_step"].is_null()) {
        checkpoint = "step " + std::to_string(r["checkpoint_step"].get<int64_t>());
        if (!r["checkpoint_age_s"].is_null()) {
          checkpoint += ", " + list_age(r["checkpoint_age_s"].get<int64_t>()) + " ago";
        }
      }
      std::cout << pad(r["name"].get<std::string>(), name_width) << "  "
                << pad(r["state"].get<std::string>(), 16) << "  " << pad(list_progress(r), 18)
                << "  " << pad(top1, 7) << "  "
                << pad(std::to_string(r["restarts"].get<int64_t>()), 8) << "  " << checkpoint
                << '\n';
    }
  });
}

}  // namespace hpctrain::cli
