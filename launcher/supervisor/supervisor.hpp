// The step supervisor: what the batch script hands over to (`hpctrain supervise`, one per job
// attempt, on the batch host). It runs the training step with srun, watches the step's nodes
// (their slurmd answering, the workers' hang and evict verdicts in metrics.jsonl), starts a new
// step on healthy nodes when one is lost, records every step in the ledger (attempts.jsonl,
// through common/records.hpp, the same reader and writer `status`, `list` and the report use), and
// at the end decides with step/decide.hpp whether the job is requeued, and which nodes it excludes.
// It asks Slurm through the Slurm layer (slurm/client.hpp) and the nodes through a NodeProbe
// (step/node_probe.hpp). docs/resilience.md and docs/preemption.md describe the protocol.
// Thread safety: one supervisor per process; `terminated` is written by a signal handler.
#pragma once

#include <csignal>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "render/render.hpp"
#include "slurm/client.hpp"
#include "supervisor/decide.hpp"
#include "supervisor/node_probe.hpp"

namespace hpctrain::supervisor {

// The job attempt as the batch script and Slurm's environment describe it.
struct AttemptContext {
  std::filesystem::path task_dir;  // the run directory (a task's, in a job array)
  std::string spec_file;           // task_dir/spec.toml as the worker is to be given it
  std::string job;                 // what scontrol requeue takes: "123" or "123_4"
  std::optional<int64_t> array_task;
  std::string slurm_job_id;          // SLURM_JOB_ID: the job whose steps run here
  int64_t restart = 0;               // SLURM_RESTART_COUNT, plus HPCTRAIN_CHAIN_RESTART in a chain
  std::string nodes;                 // SLURM_JOB_NODELIST, "?" when missing or malformed
  std::string started;               // when the attempt began (UTC)
  std::string batch_host;            // SLURMD_NODENAME, else this host's short name
  std::string partition;             // SLURM_JOB_PARTITION
  std::optional<int64_t> job_nodes;  // SLURM_JOB_NUM_NODES
};

// Reads Slurm's variables of the job attempt; the rest of the context is the caller's.
AttemptContext context_from_env();

// Set (to 1) by the TERM and INT handlers: scancel, the time limit or a requeue is ending the job.
extern volatile std::sig_atomic_t g_terminated;

// What the supervisor needs of the spec: its knobs, and the srun command line of a step of a
// given shape.
using SrunArgv = std::function<std::vector<std::string>(const render::StepShape& shape)>;
struct SupervisorOptions {
  Knobs knobs;
  SrunArgv srun_argv;
};
// `spec_file`: the frozen spec as the workers are to be given it (AttemptContext::spec_file).
SupervisorOptions supervisor_options_from_spec(const spec::Spec& spec,
                                               const std::string& spec_file);

// Runs the job attempt's srun steps to the end and returns the batch job's exit status (0 when it
// requeued the job or submitted the next job of a chain). The attempt's last ledger line is
// written once that is decided, its reason saying which (requeued, or chained where Slurm refused
// the requeue). What Slurm does not answer (no controller) counts as unknown, as a refusal
// does: no node is watched, none excluded, no step signalled through Slurm, and a job of unknown
// state is taken as still running. A requeue that got no answer is not followed by a chain: it
// may have taken effect, and two jobs would then run in the one run directory.
int supervise(const AttemptContext& context, const SupervisorOptions& options,
              slurm::SlurmClient& slurm, const NodeProbe& probe = probe_slurmds);

// Appends the ledger line of an attempt that ended before its first step (its set-up failed);
// `evidence`: why, where the supervisor knows (default: the batch script's lines above).
void record_setup_failure(const AttemptContext& context, int status, records::Reason reason,
                          int64_t world, const std::string& evidence = "");

}  // namespace hpctrain::supervisor
