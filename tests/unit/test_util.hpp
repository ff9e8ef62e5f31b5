// Helpers shared by the unit tests: temporary directories and files, spec loading shortcuts.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "spec/spec.hpp"

namespace hpctrain::test {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hpctrain-test-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

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

// A minimal valid spec; tests append or replace lines.
inline std::string minimal_spec(const std::string& extra = {}) {
  return "[job]\nname = \"t\"\nrun_dir = \"/var/tmp/runs/{name}\"\n[data]\nsynthetic = true\n" +
         extra;
}

}  // namespace hpctrain::test
