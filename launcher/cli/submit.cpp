// hpctrain submit SPEC: resolve, create the run directory, freeze the spec, write the script,
// sbatch it (argv, no shell), record and print the job id. When sbatch fails, a run directory this
// submit created is removed again.
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "common/records.hpp"
#include "common/time.hpp"
#include "render/render.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {

run::Prepared prepare_run(const spec::Resolved& resolved, bool force) {
  const std::string script =
      render::sbatch_script(resolved.spec, resolved.tasks.size(), executable_path());
  auto prepared = run::prepare(resolved, script, force);
  if (prepared.spec_changed) {
    std::cerr << "hpctrain: replaced the frozen spec in " << prepared.run_dir.string()
              << " (--force); the old one is kept as spec.toml.replaced-N\n";
  }
  if (prepared.unsubmitted_spec_replaced) {
    std::cerr << "hpctrain: " << prepared.run_dir.string()
              << " was never submitted; its spec (from a dry run) is replaced by this one\n";
  }
  return prepared;
}

Submitted submit_spec(const spec::Resolved& resolved, bool force) {
  const auto prepared = prepare_run(resolved, force);
  std::string job_id;
  try {
    job_id = slurm::make_command_client()->submit(prepared.script, {});
  } catch (const slurm::SlurmError& e) {
    // A failed submit leaves no run directory behind that it created itself; one that existed
    // before (earlier submissions, a dry run) keeps what it had.
    if (!run::discard_unsubmitted(prepared)) throw;
    throw Exit(kExitFailure, std::string("hpctrain: slurm: ") + e.what() +
                                 "\nhpctrain: nothing submitted; removed " +
                                 prepared.created.string() + ", which this submit had created");
  }
  records::append_submission(prepared.run_dir, {job_id, utc_now(), prepared.array_tasks});
  std::cerr << "submitted job " << job_id << "; run directory " << prepared.run_dir.string()
            << '\n';
  return {job_id, prepared.run_dir};
}

void add_submit(CLI::App& app) {
  struct Args {
    SpecArgs spec;
    bool dry_run = false;
    bool force = false;
    std::string dependency, begin;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("submit", "Submit a job spec to Slurm");
  args->spec.add_to(*cmd);
  cmd->add_flag("--dry-run", args->dry_run,
                "Write the run directory and script, but do not call sbatch");
  cmd->add_flag("--force", args->force, "Replace a different frozen spec in the run directory");
  // sbatch's own spelling for the two options people give per submission; each is the spec key
  // set with --set.
  cmd->add_option("-d,--dependency", args->dependency,
                  "Start after other jobs, as sbatch's: afterok:123, singleton (job.dependency)");
  cmd->add_option("--begin", args->begin,
                  "Start no earlier than this, as sbatch's: now+1hour, 16:00 (job.begin)");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kSpec)) return;
    if (!args->dependency.empty())
      args->spec.overrides.push_back("job.dependency=" + args->dependency);
    if (!args->begin.empty()) args->spec.overrides.push_back("job.begin=" + args->begin);
    const auto resolved = load_or_exit(args->spec, /*check_paths=*/true);
    if (args->dry_run) {
      const auto prepared = prepare_run(resolved, args->force);
      std::cerr << "dry run: wrote " << prepared.script.string() << "; not submitted\n";
      return;
    }
    const std::string job_id = submit_spec(resolved, args->force).job_id;
    std::cout << job_id << '\n';
  });
}

}  // namespace hpctrain::cli
