// What the subcommands share: the spec loading options, the exit codes, where profiles and the
// worker live. Thread safety: single-threaded CLI.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <csignal>
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
  std::optional<std::string> paths_relative_to;

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
// The non-empty folders of a colon-separated list (PATH, HPCTRAIN_PROFILE_PATH); none for null.
std::vector<std::filesystem::path> folders_in(const char* colon_separated);
// Where site profiles are looked for: $HPCTRAIN_PROFILE_PATH's folders, the installation's
// share/hpctrain/profiles, and in a build tree the source's sbatch/profiles.
std::vector<std::filesystem::path> profile_dirs();
// This program's path, as the batch script is to run it (`hpctrain supervise`).
std::string executable_path();

// Ctrl-C while following a log (logs -f, here or on a login node): SIGINT sets
// sigint_received() for the guard's lifetime; the previous handler comes back after.
volatile std::sig_atomic_t& sigint_received();
class SigintGuard {
 public:
  SigintGuard();
  ~SigintGuard();
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

 private:
  struct sigaction previous_ {};
};

// hpctrain --host LOGIN (cli/remote.cpp; docs/quickstart.md "From your own machine"): --host,
// --remote-hpctrain and --remote-dir on the app.
void add_remote_options(CLI::App& app);
// What a subcommand sends to the login node beside its arguments.
enum class Remote {
  kRunDir,  // status, list, cancel: the arguments only
  kSpec,    // check, submit: the spec, staged there
  kRender,  // the spec; the script written here with -o
  kReport,  // the page copied back here
  kLogs,    // with -f, Ctrl-C here ends the follow there
};
// The first step of every subcommand that runs on a login node: when a login host is in effect,
// runs the parsed `cmd` there and returns true (throwing Exit with the remote status when it is
// not 0); false when the command is to run here.
bool run_remotely(const CLI::App& cmd, Remote what);
// For a subcommand that runs only here (drill): refuses when a login host is given.
void refuse_remotely(const CLI::App& cmd);

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
void add_track(CLI::App& app);

}  // namespace hpctrain::cli
