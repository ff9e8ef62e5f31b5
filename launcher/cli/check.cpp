// hpctrain check SPEC: validate and report every problem at once (exit 2 on errors).
#include <iostream>
#include <memory>

#include "cli/common.hpp"

namespace hpctrain::cli {

void add_check(CLI::App& app) {
  struct Args {
    SpecArgs spec;
    bool print = false;
    bool no_path_checks = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("check", "Validate a job spec and report every problem");
  args->spec.add_to(*cmd);
  cmd->add_flag("--print", args->print, "Print the resolved (frozen) spec");
  cmd->add_flag("--no-path-checks", args->no_path_checks,
                "Skip checks of files that must exist at submit time (data, worker)");
  cmd->callback([args] {
    const auto resolved = load_or_exit(args->spec, !args->no_path_checks);
    if (args->print) std::cout << spec::freeze(resolved.spec);
    std::cerr << args->spec.spec_file << ": ok";
    if (!resolved.tasks.empty())
      std::cerr << " (job array of " << resolved.tasks.size() << " tasks)";
    std::cerr << '\n';
  });
}

}  // namespace hpctrain::cli
