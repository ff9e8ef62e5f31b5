// What `hpctrain cancel` decides before it calls scancel: whether the run's job has already ended,
// by Slurm's word (squeue, sacct) or, where Slurm no longer knows the job, by the run's ledger, so
// that it says so instead of claiming to have cancelled a finished job.
// Thread safety: functions are reentrant.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/records.hpp"
#include "slurm/client.hpp"

namespace hpctrain::run {

// Where job `job_id` has ended: "COMPLETED, per squeue" (every task of an array in a terminal
// state: "COMPLETED, FAILED, per sacct"), or "completed, per the run's ledger attempts.jsonl" when
// `states` is empty (Slurm no longer knows the job) and `attempts` (the ledger, empty for an array)
// ends the job's last line with a final reason. nullopt while the job may still run, or when nobody
// can tell.
std::optional<std::string> job_already_ended(const std::string& job_id,
                                             const std::vector<slurm::JobState>& states,
                                             const std::vector<records::Attempt>& attempts);

// Whether scancel's complaint means that the job had ended before it could be cancelled
// ("Job/step already completing or completed").
bool is_already_ended_message(const std::string& text);

}  // namespace hpctrain::run
