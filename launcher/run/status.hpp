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

#include "run/goodput.hpp"
#include "run/snapshot.hpp"
#include "slurm/client.hpp"

namespace hpctrain::run {

// The goodput ledger (run/goodput.hpp) of the run or task of `snapshot` (read with its spec, for
// the nodes and GPUs allocated): Slurm's `states` say whether its job `job_id` goes on and when
// the attempt running now started; with `slurm_answered` false (Slurm could not be asked) the run
// goes on unless its ledger says it ended. `now` is the time of asking.
std::optional<Goodput> run_goodput(const Snapshot& snapshot,
                                   const std::vector<slurm::JobState>& states,
                                   const std::string& job_id, bool slurm_answered, double now);

// status --json's "goodput" object: wall_s, fraction (training over wall), one number of seconds
// per part (queue_wait_s, startup_s, training_s, evaluation_s, checkpoint_stall_s, work_lost_s,
// recovery_s, idle_end_s), begin and end (UTC), ongoing, nodes, gpus_per_node, node_hours and
// gpu_hours (total and each part, null when unknown or no GPUs) and attempts (each srun step's
// parts).
nlohmann::json goodput_json(const Goodput& goodput);

// "87.3%: training 1h02m of 1h11m; queue 3m10s, ...; 2.37 node-hours": the status line after
// "goodput ", from goodput_json's object.
std::string goodput_text(const nlohmann::json& goodput);

// "87.3%", with " so far" while the run goes on: list's column.
std::string goodput_percent(const nlohmann::json& goodput);

// One JSON object (docs/run-directory.md names the fields status --json prints); last_train,
// last_eval and last_ranks are the last records of their kind as records::to_json writes them.
nlohmann::json describe_run_dir(const Snapshot& snapshot);

// describe_run_dir's object as status prints it, each line after `indent`.
void print_run_dir(std::ostream& out, const nlohmann::json& d, const std::string& indent);

// `status --json`'s object for the run directory of `snapshot` (read with its tasks): its absolute
// path ("run_dir"), its last submission ("job_id", null when never submitted; "submitted_at";
// "chain": the job ids of its chain, oldest first, this one last), Slurm's answer for that job
// ("slurm": `states`; "slurm_error" when the query failed), describe_run_dir's fields and the
// goodput ledger ("goodput", goodput_json's; absent with nothing to account), or one such object
// per task ("tasks") for an array run. `now` (Unix time; default: the clock's) ends the wall time
// of a run that goes on.
nlohmann::json status_report(const Snapshot& snapshot, const std::vector<slurm::JobState>& states,
                             const std::string& slurm_error,
                             std::optional<double> now = std::nullopt);

// status_report's object as `status` prints it.
void print_status(std::ostream& out, const nlohmann::json& report);

}  // namespace hpctrain::run
