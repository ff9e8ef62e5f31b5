// hpctrain track RUN_DIR [--follow]: pushes a run's params, metrics, tags, status and report to
// the MLflow server of its spec's [tracking] (launcher/tracking/push.hpp; docs/tracking.md), from
// a node that reaches the server (a login node) when the compute nodes do not. Idempotent: a
// second push sends nothing twice. --follow pushes every --interval seconds until the run has
// ended (its ledger's last reason is final and Slurm no longer holds its job) or Ctrl-C; a server
// that is down is said and tried again on the next round.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/common.hpp"
#include "common/records.hpp"
#include "run/listing.hpp"
#include "slurm/client.hpp"
#include "tracking/push.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;

struct TrackArgs {
  std::string run_dir;
  bool follow = false;
  int interval_s = 30;
  int timeout_s = 120;
};

// The directories pushed: the run's own, or each task's of an array run.
std::vector<fs::path> tracked_dirs(const fs::path& run_dir) {
  if (!fs::exists(run_dir / layout::kSpec)) {
    throw Exit(kExitBadInput, "hpctrain track: " + run_dir.string() +
                                  " is not a run directory (no " + layout::kSpec + ")");
  }
  std::vector<fs::path> dirs;
  for (const auto& [task, dir] : run::array_task_dirs(run_dir)) dirs.push_back(dir);
  if (dirs.empty()) dirs.push_back(run_dir);
  return dirs;
}

// One push of each directory; false when one failed. A spec without tracking is an error.
bool push_all(const std::vector<fs::path>& dirs, int timeout_s, std::vector<std::string>& status) {
  bool ok = true;
  status.clear();
  for (const auto& dir : dirs) {
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
    try {
      const auto out = tracking::push(dir, deadline);
      const auto state = tracking::read_state(dir);
      std::cout << dir.string() << ": "
                << tracking::describe(out, state ? state.value().mlflow_uri : "") << std::endl;
      for (const auto& note : out.notes) std::cerr << "hpctrain track: " << note << "\n";
      status.push_back(out.status);
    } catch (const tracking::NotTracked& e) {
      throw Exit(kExitBadInput, std::string("hpctrain track: ") + e.what());
    } catch (const run::RunDirError& e) {
      throw Exit(kExitBadInput, std::string("hpctrain track: ") + e.what());
    } catch (const std::exception& e) {
      std::cerr << "hpctrain track: " << dir.string() << ": " << e.what() << std::endl;
      ok = false;
      status.emplace_back();
    }
  }
  return ok;
}

// Slurm still holds the run's last job (pending, running, requeued); where Slurm cannot be asked,
// the ledger's final reason is taken as the end.
bool job_goes_on(const fs::path& run_dir) {
  const auto submission = records::last_submission(run_dir);
  if (!submission) return false;
  try {
    const auto client = slurm::make_command_client();
    for (const auto& s : client->query(submission->job_id)) {
      if (s.state == "PENDING" || s.state == "RUNNING" || s.state == "REQUEUED" ||
          s.state == "CONFIGURING" || s.state == "COMPLETING" || s.state == "SUSPENDED" ||
          s.state == "REQUEUE_HOLD" || s.state == "RESIZING" || s.state == "STAGE_OUT") {
        return true;
      }
    }
    return false;
  } catch (const std::exception&) {
    return false;
  }
}

bool ended(const fs::path& run_dir, const std::vector<std::string>& status) {
  for (const auto& s : status) {
    if (s.empty() || s == "RUNNING") return false;
  }
  return !job_goes_on(run_dir);
}

void track(const TrackArgs& a) {
  const auto dirs = tracked_dirs(a.run_dir);
  std::vector<std::string> status;
  if (!a.follow) {
    if (!push_all(dirs, a.timeout_s, status)) throw Exit(kExitFailure, "");
    return;
  }
  SigintGuard sigint;
  while (true) {
    const bool ok = push_all(dirs, a.timeout_s, status);
    if (ok && ended(a.run_dir, status)) return;
    const auto next = Clock::now() + std::chrono::seconds(a.interval_s);
    while (Clock::now() < next) {
      if (sigint_received()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

}  // namespace

void add_track(CLI::App& app) {
  auto args = std::make_shared<TrackArgs>();
  auto* cmd = app.add_subcommand(
      "track",
      "Push a run's params, metrics, tags and report to the MLflow server of its [tracking]");
  cmd->add_option("run_dir", args->run_dir, "Run directory")->required();
  cmd->add_flag("--follow,-f", args->follow,
                "Push again every --interval seconds until the run has ended (or Ctrl-C)");
  cmd->add_option("--interval", args->interval_s, "Seconds between pushes with --follow")
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--timeout", args->timeout_s, "Seconds one push may take, at most")
      ->check(CLI::Range(1, 3600));
  cmd->callback([args, cmd] {
    if (args->follow) {
      refuse_remotely(*cmd);
    } else if (run_remotely(*cmd, Remote::kRunDir)) {
      return;
    }
    track(*args);
  });
}

}  // namespace hpctrain::cli
