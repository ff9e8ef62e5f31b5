#include "cli/common.hpp"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "version.hpp"

namespace hpctrain::cli {

namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

std::string executable_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("hpctrain") : exe.string();
}

namespace {

volatile std::sig_atomic_t g_sigint_received = 0;

extern "C" void on_sigint(int) { g_sigint_received = 1; }

}  // namespace

volatile std::sig_atomic_t& sigint_received() { return g_sigint_received; }

SigintGuard::SigintGuard() {
  g_sigint_received = 0;
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_);
}

SigintGuard::~SigintGuard() { sigaction(SIGINT, &previous_, nullptr); }

void SpecArgs::add_to(CLI::App& app) {
  app.add_option("spec", spec_file, "Job spec (TOML)")->required();
  app.add_option("--set", overrides, "Override a key: --set train.epochs=10 (repeatable)")
      ->take_all();
  app.add_option("--profile", profile,
                 "Site profile (sbatch/profiles/NAME.toml); default: job.profile, else "
                 "$HPCTRAIN_PROFILE");
  app.add_option("--paths-relative-to", paths_relative_to,
                 "Take the spec's relative paths (data, worker, weights) from this folder instead "
                 "of the spec file's (hpctrain --host passes the login node's working directory)");
}

std::vector<fs::path> folders_in(const char* colon_separated) {
  std::vector<fs::path> dirs;
  if (!colon_separated) return dirs;
  const std::string p = colon_separated;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t colon = p.find(':', start);
    const std::string dir = p.substr(start, colon - start);
    if (!dir.empty()) dirs.emplace_back(dir);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return dirs;
}

std::vector<fs::path> profile_dirs() {
  std::vector<fs::path> dirs = folders_in(std::getenv("HPCTRAIN_PROFILE_PATH"));
  const fs::path exe_dir = executable_dir();
  dirs.push_back(exe_dir.parent_path() / "share" / "hpctrain" / "profiles");
  std::error_code ec;
  if (fs::equivalent(exe_dir, kBuildBinDir, ec)) dirs.emplace_back(kSourceProfileDir);
  return dirs;
}

spec::LoadOptions SpecArgs::load_options(bool check_paths) const {
  spec::LoadOptions o;
  o.spec_file = spec_file;
  o.overrides = overrides;
  o.profile = profile;
  if (const char* name = std::getenv("HPCTRAIN_PROFILE"); name && *name) o.default_profile = name;
  o.check_paths = check_paths;
  o.profile_dirs = profile_dirs();
  o.default_worker = executable_dir() / "hpctrain-worker";
  if (paths_relative_to) o.paths_relative_to = *paths_relative_to;
  return o;
}

spec::Resolved load_or_exit(const SpecArgs& args, bool check_paths) {
  try {
    auto resolved = spec::load(args.load_options(check_paths));
    if (!resolved.warnings.empty()) std::cerr << spec::format_all(resolved.warnings);
    return resolved;
  } catch (const spec::SpecError& e) {
    throw Exit(kExitBadInput, e.what());
  }
}

}  // namespace hpctrain::cli
