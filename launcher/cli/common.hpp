// What the subcommands share: the spec loading options, the exit codes, where profiles and the
// worker live. Thread safety: single-threaded CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "run/run_dir.hpp"
#include "spec/spec.hpp"

namespace hpctrain::cli {

// Thrown by a subcommand to end with a given status after printing `what()` to stderr.
using Exit = ExitWith;

// --set and --profile, shared by check, render and submit.
struct SpecArgs {
  std::string spec_file;
  std::vector<std::string> overrides;
  std::optional<std::string> profile;

  void add_to(CLI::App& app);
  spec::LoadOptions load_options(bool check_paths) const;
};

// Loads the spec; prints warnings to stderr; on errors prints them all and throws Exit(2).
spec::Resolved load_or_exit(const SpecArgs& args, bool check_paths);

// submit's own steps, also the drill's: the run directory prepared (the spec frozen, the script
// written; what was replaced said on stderr), then sbatch, the submission recorded and said.
// Throws Exit(1) when sbatch fails, having removed a run directory it created.
struct Submitted {
  std::string job_id;
  std::filesystem::path run_dir;
};
run::Prepared prepare_run(const spec::Resolved& resolved, bool force);
Submitted submit_spec(const spec::Resolved& resolved, bool force);

std::filesystem::path executable_dir();
// This program's path, as the batch script is to run it (`hpctrain supervise`).
std::string executable_path();

void add_init(CLI::App& app);
void add_check(CLI::App& app);
void add_render(CLI::App& app);
void add_submit(CLI::App& app);
void add_status(CLI::App& app);
void add_cancel(CLI::App& app);
void add_keys(CLI::App& app);
void add_report(CLI::App& app);
void add_list(CLI::App& app);
void add_logs(CLI::App& app);
void add_supervise(CLI::App& app);
void add_drill(CLI::App& app);

}  // namespace hpctrain::cli
