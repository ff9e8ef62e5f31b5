// Helpers shared by the unit tests: temporary directories and files, spec loading shortcuts.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spec/spec.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::test {

namespace fs = std::filesystem;

inline void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline fs::path source_dir() { return HPCTRAIN_SOURCE_DIR; }

// Load options for a spec file without path checks, with the source tree's profiles.
inline spec::LoadOptions options_for(const fs::path& file) {
  spec::LoadOptions o;
  o.spec_file = file;
  o.check_paths = false;
  o.profile_dirs = {source_dir() / "sbatch" / "profiles"};
  o.default_worker = "/opt/hpctrain/bin/hpctrain-worker";
  return o;
}

// Writes `text` as DIR/spec.toml; its load options with `overrides`.
inline spec::LoadOptions spec_in(const TempDir& dir, const std::string& text,
                                 std::vector<std::string> overrides = {}) {
  write_text(dir / "spec.toml", text);
  auto o = options_for(dir / "spec.toml");
  o.overrides = std::move(overrides);
  return o;
}

// A minimal valid spec; tests append or replace lines.
inline std::string minimal_spec(const std::string& extra = {}) {
  return "[job]\nname = \"t\"\nrun_dir = \"/var/tmp/runs/{name}\"\n[data]\nsynthetic = true\n" +
         extra;
}

}  // namespace hpctrain::test
