// hpctrain check SPEC: validate and report every problem at once (exit 2 on errors). Unless
// --offline, the job is then compared with the cluster Slurm describes (partition, GPUs per node,
// nodes, time limit; account and QoS where accounting answers); when no controller answers, check
// says so in one line and the spec's own verdict stands.
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "slurm/client.hpp"
#include "slurm/cluster_check.hpp"
#include "slurm/cluster_info.hpp"

namespace hpctrain::cli {
namespace {

std::string user_name() {
  if (const char* u = std::getenv("USER"); u && *u) return u;
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

// Prints what Slurm's answer adds (warnings, notes); throws Exit(2) with the errors.
void check_against_slurm(const std::string& spec_file, const spec::Spec& spec) {
  const auto client = slurm::make_command_client({std::chrono::milliseconds(15000)});
  std::vector<slurm::PartitionInfo> partitions;
  try {
    partitions = client->partitions();
  } catch (const slurm::SlurmError& e) {
    std::cerr << spec_file << ": not checked against Slurm: " << e.what()
              << " (--offline skips this)\n";
    return;
  }
  std::optional<slurm::Accounting> accounting;
  if (spec.job.account || spec.job.qos) {
    accounting = client->accounting(user_name());
  }
  const spec::Origin origin{spec_file, 0, 0, ""};
  const auto result = slurm::check_against_cluster(spec, partitions, accounting, origin);
  for (const auto& note : result.notes) std::cerr << spec_file << ": " << note << '\n';
  std::vector<spec::Diagnostic> errors, warnings;
  for (const auto& d : result.diagnostics) {
    (d.severity == spec::Severity::kError ? errors : warnings).push_back(d);
  }
  if (!warnings.empty()) std::cerr << spec::format_all(warnings);
  if (!errors.empty()) throw Exit(kExitBadInput, spec::format_all(errors));
}

}  // namespace

void add_check(CLI::App& app) {
  struct Args {
    SpecArgs spec;
    bool print = false;
    bool no_path_checks = false;
    bool offline = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "check",
      "Validate a job spec and report every problem; then, unless --offline, compare the job with "
      "the cluster Slurm describes (partition, GPUs per node, nodes, time limit, account, QoS)");
  args->spec.add_to(*cmd);
  cmd->add_flag("--print", args->print, "Print the resolved (frozen) spec");
  cmd->add_flag("--no-path-checks", args->no_path_checks,
                "Skip checks of files that must exist at submit time (data, worker)");
  cmd->add_flag("--offline", args->offline,
                "Do not ask Slurm (sinfo, sacctmgr): check the spec alone. Without it, a cluster "
                "that does not answer is reported in one line and does not fail the check");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kSpec)) return;
    const auto resolved = load_or_exit(args->spec, !args->no_path_checks);
    if (args->print) std::cout << spec::freeze(resolved.spec);
    if (!args->offline) check_against_slurm(args->spec.spec_file, resolved.spec);
    std::cerr << args->spec.spec_file << ": ok";
    if (!resolved.tasks.empty())
      std::cerr << " (job array of " << resolved.tasks.size() << " tasks)";
    std::cerr << '\n';
  });
}

}  // namespace hpctrain::cli
