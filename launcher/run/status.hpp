// What `hpctrain status` says of a run (or array task) directory, from its snapshot (the directory
// read once, run/snapshot.hpp): attempts and restarts, node losses and how the run went on, the
// last committed checkpoint, the latest metrics and the loss trend (run/trend.hpp); and the whole
// report with its submission and Slurm state, which the caller queries.
// Thread safety: functions are reentrant.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "run/snapshot.hpp"
#include "slurm/client.hpp"

namespace hpctrain::run {

// One JSON object (docs/run-directory.md names the fields status --json prints); last_train,
// last_eval and last_ranks are the last records of their kind as records::to_json writes them.
nlohmann::json describe_run_dir(const Snapshot& snapshot);

// describe_run_dir's object as status prints it, each line after `indent`.
void print_run_dir(std::ostream& out, const nlohmann::json& d, const std::string& indent);

// `status --json`'s object for the run directory of `snapshot` (read with its tasks): its absolute
// path ("run_dir"), its last submission ("job_id", null when never submitted; "submitted_at";
// "chain": the job ids of its chain, oldest first, this one last), Slurm's answer for that job
// ("slurm": `states`; "slurm_error" when the query failed) and describe_run_dir's fields, or one
// such object per task ("tasks") for an array run.
nlohmann::json status_report(const Snapshot& snapshot, const std::vector<slurm::JobState>& states,
                             const std::string& slurm_error);

// status_report's object as `status` prints it.
void print_status(std::ostream& out, const nlohmann::json& report);

}  // namespace hpctrain::run
