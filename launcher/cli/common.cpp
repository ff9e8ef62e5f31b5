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

void SpecArgs::add_to(CLI::App& app) {
  app.add_option("spec", spec_file, "Job spec (TOML)")->required();
  app.add_option("--set", overrides, "Override a key: --set train.epochs=10 (repeatable)")
      ->take_all();
  app.add_option("--profile", profile,
                 "Site profile (sbatch/profiles/NAME.toml); default: job.profile, else "
                 "$HPCTRAIN_PROFILE");
}

spec::LoadOptions SpecArgs::load_options(bool check_paths) const {
  spec::LoadOptions o;
  o.spec_file = spec_file;
  o.overrides = overrides;
  o.profile = profile;
  if (const char* name = std::getenv("HPCTRAIN_PROFILE"); name && *name) o.default_profile = name;
  o.check_paths = check_paths;
  if (const char* path = std::getenv("HPCTRAIN_PROFILE_PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      const size_t colon = p.find(':', start);
      const std::string dir = p.substr(start, colon - start);
      if (!dir.empty()) o.profile_dirs.emplace_back(dir);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  const fs::path exe_dir = executable_dir();
  o.profile_dirs.push_back(exe_dir.parent_path() / "share" / "hpctrain" / "profiles");
  std::error_code ec;
  if (fs::equivalent(exe_dir, kBuildBinDir, ec)) o.profile_dirs.emplace_back(kSourceProfileDir);
  o.default_worker = exe_dir / "hpctrain-worker";
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
