#include "data/paths.hpp"

#include <glob.h>

#include <algorithm>
#include <set>

#include "common/error.hpp"

namespace hpctrain::data {

namespace {

bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

}  // namespace

std::vector<std::string> expand_paths(const std::vector<std::string>& paths_or_globs) {
  std::vector<std::string> out;
  for (const auto& p : paths_or_globs) {
    if (!has_glob_chars(p)) {
      out.push_back(p);
      continue;
    }
    glob_t g{};
    const int rc = ::glob(p.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      globfree(&g);
      HPCTRAIN_THROW(rt::DataError, "dataset pattern '" + p + "' matches no files");
    }
    if (rc != 0) {
      globfree(&g);
      HPCTRAIN_THROW(rt::DataError, "dataset pattern '" + p + "': cannot list the directory");
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matches.begin(), matches.end());
    out.insert(out.end(), matches.begin(), matches.end());
  }
  if (out.empty()) HPCTRAIN_THROW(rt::DataError, "no dataset files given");
  std::set<std::string> seen;
  for (const auto& p : out) {
    if (!seen.insert(p).second) HPCTRAIN_THROW(rt::DataError, p + ": dataset file named twice");
  }
  return out;
}

}  // namespace hpctrain::data
