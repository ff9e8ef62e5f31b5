// The run directory's names, in one place for the launcher (submit, status, list, logs, report)
// and the worker (checkpoints, metrics, TensorBoard, the final weights). docs/run-directory.md
// draws the layout; sbatch/job.sbatch.in spells the same names in shell (attempts.jsonl,
// checkpoints/step-*, metrics.jsonl, task-NNN). Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace hpctrain::layout {

inline constexpr const char* kSpec = "spec.toml";                 // the frozen spec
inline constexpr const char* kScript = "job.sbatch";              // the rendered script
inline constexpr const char* kSubmissions = "submissions.jsonl";  // one line per submit
inline constexpr const char* kAttempts = "attempts.jsonl";        // the supervisor's ledger
inline constexpr const char* kMetrics = "metrics.jsonl";          // rank 0's metrics
inline constexpr const char* kCheckpoints = "checkpoints";        // step-NNNNNNNNN below
inline constexpr const char* kManifest = "manifest.json";         // a checkpoint's commit point
inline constexpr const char* kLogs = "logs";                      // slurm-JOBID.out / .err
inline constexpr const char* kTensorBoard = "tensorboard";        // event files
inline constexpr const char* kWeights = "model.pt";               // the final weights
inline constexpr const char* kReport = "report.html";             // hpctrain report's default
inline constexpr const char* kLock = ".lock";                     // serialises submits
inline constexpr const char* kLedgerReserve = ".ledger-reserve";  // room kept for the ledger

// "spec.toml.replaced-N": the N-th spec that submit --force replaced.
std::string replaced_spec_name(int n);

// "task-NNN": an array task's folder (zero-padded to 3 digits; wider numbers as they are).
std::string task_dir_name(std::size_t task);
// The task of a "task-N" folder name (1 to 9 digits), or nullopt.
std::optional<std::size_t> parse_task_dir_name(std::string_view name);

// "slurm-JOBID.out" (or .err): a job's (or "ARRAYID_TASK" array task's) batch log under logs/.
std::string log_name(const std::string& job_id, bool stderr_file);

// "step-NNNNNNNNN": a committed checkpoint's folder, zero-padded to 9 digits so that names sort
// like steps (wider steps as they are).
std::string checkpoint_name(int64_t step);
// The step of a folder name written exactly as checkpoint_name() writes it; nullopt for any
// other ("step-12", "step-0000000012" and "step-x" are someone else's).
std::optional<int64_t> parse_checkpoint_name(std::string_view name);
// ".step-NNNNNNNNN.tmp": the folder a checkpoint is written into before its commit.
std::string checkpoint_temp_name(int64_t step);
// The step of a temporary checkpoint folder's name, or nullopt.
std::optional<int64_t> parse_checkpoint_temp_name(std::string_view name);
// ".step-NNNNNNNNN.retired-K": a step retention has un-committed, being removed off the commit's
// path (K tells apart the same step retired twice).
std::string checkpoint_retired_name(int64_t step, int k);
// The step of a retired checkpoint folder's name, or nullopt.
std::optional<int64_t> parse_checkpoint_retired_name(std::string_view name);

// RUN_DIR/checkpoints/step-NNNNNNNNN/manifest.json.
std::filesystem::path checkpoint_manifest(const std::filesystem::path& run_dir, int64_t step);

}  // namespace hpctrain::layout
