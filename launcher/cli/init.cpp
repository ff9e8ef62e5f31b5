// hpctrain init [FILE]: writes a commented starter spec (to stdout without FILE).
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/common.hpp"
#include "run/run_dir.hpp"

namespace hpctrain::embedded {
std::string_view starter_spec();
}

namespace hpctrain::cli {

void add_init(CLI::App& app) {
  struct Args {
    std::string file;
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("init", "Write a commented starter job spec");
  cmd->add_option("file", args->file, "Where to write it (default: standard output)");
  cmd->add_flag("--force", args->force, "Overwrite an existing file");
  cmd->callback([args] {
    // The starter's run_dir points under the current directory so it passes `check` as written.
    std::string text(embedded::starter_spec());
    const std::string marker = "/scratch/USER/runs/{name}";
    if (auto at = text.find(marker); at != std::string::npos) {
      text.replace(at, marker.size(), (std::filesystem::current_path() / "runs/{name}").string());
    }
    if (args->file.empty()) {
      std::cout << text;
      return;
    }
    if (std::filesystem::exists(args->file) && !args->force) {
      throw Exit(kExitFailure, "hpctrain: " + args->file + " exists; use --force to overwrite it");
    }
    run::write_file_atomic(args->file, text);
    std::cerr << "wrote " << args->file << "; check it with: hpctrain check " << args->file << '\n';
  });
}

}  // namespace hpctrain::cli
