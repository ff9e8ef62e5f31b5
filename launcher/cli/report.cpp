// hpctrain report RUN_DIR [-o FILE]: one self-contained HTML page (launcher/report/) with the run's
// curves, attempts and checkpoints; RUN_DIR/report.html unless -o names another file.
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "common/run_layout.hpp"
#include "report/report.hpp"
#include "run/run_dir.hpp"

namespace hpctrain::cli {

void add_report(CLI::App& app) {
  struct Args {
    std::string run_dir;
    std::string output;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "report", "Write an HTML page of a run's curves, attempts and checkpoints (opens offline)");
  cmd->add_option("run_dir", args->run_dir, "Run directory")->required();
  cmd->add_option("-o,--output", args->output, "The page to write (default RUN_DIR/report.html)");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kReport)) return;
    namespace fs = std::filesystem;
    const fs::path dir = args->run_dir;
    run::require_run_dir(dir);
    const fs::path out = args->output.empty() ? dir / layout::kReport : fs::path(args->output);
    const std::string page = report::render_html(report::collect(dir));
    try {
      run::write_file_atomic(out, page);
    } catch (const std::exception& e) {
      throw Exit(kExitFailure,
                 "hpctrain: cannot write the report " + out.string() + ": " + e.what());
    }
    std::cout << out.string() << '\n';
  });
}

}  // namespace hpctrain::cli
