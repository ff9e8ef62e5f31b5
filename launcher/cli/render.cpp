// hpctrain render SPEC [-o FILE]: print or write the sbatch script (deterministic).
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "render/render.hpp"
#include "run/run_dir.hpp"

namespace hpctrain::cli {

void add_render(CLI::App& app) {
  struct Args {
    SpecArgs spec;
    std::string output;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("render", "Print the sbatch script a spec renders to");
  args->spec.add_to(*cmd);
  cmd->add_option("-o,--output", args->output, "Write the script to this file");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kRender)) return;
    const auto resolved = load_or_exit(args->spec, /*check_paths=*/false);
    const std::string script =
        render::sbatch_script(resolved.spec, resolved.tasks.size(), executable_path());
    if (args->output.empty()) {
      std::cout << script;
    } else {
      run::write_file_atomic(args->output, script);
    }
  });
}

}  // namespace hpctrain::cli
