// hpctrain supervise: what the rendered batch script hands over to (sbatch/job.sbatch.in), not
// a command for users (hidden from the help). It runs the job attempt's training steps
// (step/supervisor.hpp) and exits with the batch job's status; with --record it only appends the
// ledger line of an attempt whose set-up failed.
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "common/records.hpp"
#include "supervisor/provenance.hpp"
#include "supervisor/supervisor.hpp"
#include "tracking/push.hpp"

namespace hpctrain::cli {
namespace {

extern "C" void on_term(int) { supervisor::g_terminated = 1; }

// TERM and INT only set the flag; no SA_RESTART, so that a sleep notices soon.
void handle_term() {
  struct sigaction sa {};
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

struct SuperviseArgs {
  std::string task_dir, spec_file, job, array_task = "null", started, record;
  int terminated = 0, status = 0;
  int64_t world = 0;
};

supervisor::AttemptContext context_of(const SuperviseArgs& a) {
  auto c = supervisor::context_from_env();
  c.task_dir = a.task_dir;
  c.spec_file = a.spec_file;
  c.job = a.job;
  if (a.array_task != "null") {
    if (a.array_task.empty() || a.array_task.size() > 9 ||
        a.array_task.find_first_not_of("0123456789") != std::string::npos) {
      throw Exit(kExitBadInput, "hpctrain supervise: --array-task must be a number or null, not '" +
                                    a.array_task + "'");
    }
    c.array_task = std::stoll(a.array_task);
  }
  c.started = a.started;
  return c;
}

// After the attempt (its ledger line written): the run pushed to its tracking server, when the
// spec has one and this node reaches it, within a deadline (shorter when Slurm is ending the job:
// KillWait). A failure is one line in the job's log; `hpctrain track` pushes later.
void push_tracking(const spec::Spec& spec, const std::filesystem::path& task_dir) {
  if (!spec.tracking.mlflow_uri) return;
  const auto budget = std::chrono::seconds(supervisor::g_terminated ? 15 : 60);
  try {
    const auto out = tracking::push(task_dir, Clock::now() + budget);
    std::cout << "hpctrain: tracking: " << tracking::describe(out, *spec.tracking.mlflow_uri)
              << std::endl;
    for (const auto& note : out.notes) std::cerr << "hpctrain: tracking: " << note << "\n";
  } catch (const std::exception& e) {
    std::cerr << "hpctrain: tracking: not pushed (" << e.what() << "); run 'hpctrain track "
              << task_dir.string() << "' where the server can be reached" << std::endl;
  }
}

int run_supervisor(const SuperviseArgs& args) {
  if (args.terminated) supervisor::g_terminated = 1;
  const auto context = context_of(args);
  spec::LoadOptions options;
  options.spec_file = args.spec_file;
  options.check_paths = false;  // the frozen spec was checked at submit time
  spec::Spec spec;
  try {
    spec = spec::load(options).spec;
  } catch (const spec::SpecError& e) {
    std::cerr << "hpctrain: the frozen spec " << args.spec_file << " cannot be read:\n"
              << spec::format_all(e.diagnostics());
    supervisor::record_setup_failure(context, kExitBadInput, records::Reason::kSetupFailed, 0);
    return kExitBadInput;
  }
  // Which worker binary this attempt runs, against the run's first (supervisor/provenance.hpp).
  const auto provenance = supervisor::check_provenance(
      context.task_dir, spec.job.worker, spec.resilience.require_same_binary, context.job);
  if (!provenance.line.empty()) std::cerr << provenance.line << "\n";
  if (provenance.stop) {
    supervisor::record_setup_failure(context, kExitBadInput, records::Reason::kSetupFailed, 0,
                                     provenance.line);
    return kExitBadInput;
  }
  // Queries get 10 s: the supervisor asks them while a step stops or the job ends.
  const auto client = slurm::make_command_client(
      {std::chrono::milliseconds(60000), std::chrono::milliseconds(10000)});
  const int status = supervisor::supervise(
      context, supervisor::supervisor_options_from_spec(spec, context.spec_file), *client);
  push_tracking(spec, context.task_dir);
  return status;
}

}  // namespace

void add_supervise(CLI::App& app) {
  auto args = std::make_shared<SuperviseArgs>();
  auto* cmd = app.add_subcommand(
      "supervise", "Run a job attempt's training steps (the batch script's own command)");
  cmd->group("");  // not for users: the rendered script runs it
  cmd->add_option("--task-dir", args->task_dir, "The run directory (a task's, in an array)")
      ->required();
  cmd->add_option("--spec", args->spec_file, "The frozen spec, as the worker is given it")
      ->required();
  cmd->add_option("--job", args->job, "The job to requeue: ID or ARRAYID_TASK")->required();
  cmd->add_option("--array-task", args->array_task, "The array task, or null");
  cmd->add_option("--started", args->started, "When the attempt began (UTC)")->required();
  cmd->add_option("--terminated", args->terminated, "1 when TERM came before the hand-over");
  cmd->add_option("--record", args->record, "Only record an attempt that ended with REASON");
  cmd->add_option("--status", args->status, "With --record: its exit status");
  cmd->add_option("--world", args->world, "With --record: its world size");
  cmd->callback([args] {
    handle_term();
    if (!args->record.empty()) {
      const auto reason = records::parse<records::Reason>(args->record);
      if (!reason) {
        throw Exit(kExitBadInput,
                   "hpctrain supervise: --record takes a ledger reason "
                   "(docs/run-directory.md), not '" +
                       args->record + "'");
      }
      supervisor::record_setup_failure(context_of(*args), args->status, *reason, args->world);
      return;
    }
    const int status = run_supervisor(*args);
    if (status != 0) throw Exit(status, "");
  });
}

}  // namespace hpctrain::cli
