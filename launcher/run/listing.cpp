#include "run/listing.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <regex>
#include <toml.hpp>

namespace hpctrain::run {
namespace {

bool is_run_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "spec.toml", ec) && fs::is_regular_file(dir / "job.sbatch", ec);
}

void collect_run_dirs(const fs::path& dir, std::vector<fs::path>& out, int depth) {
  if (is_run_dir(dir)) {
    out.push_back(dir);
    return;
  }
  // Deep enough for any sensible tree of runs; a guard against pathological nesting.
  if (depth >= 32) return;
  std::error_code ec;
  for (fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_symlink(type_ec) || !it->is_directory(type_ec)) continue;
    collect_run_dirs(it->path(), out, depth + 1);
  }
}

std::optional<int64_t> spec_integer(const toml::value& spec, const char* table, const char* key) {
  if (!spec.contains(table) || !spec.at(table).is_table()) return std::nullopt;
  const auto& t = spec.at(table);
  if (!t.contains(key) || !t.at(key).is_integer()) return std::nullopt;
  return static_cast<int64_t>(t.at(key).as_integer());
}

}  // namespace

std::vector<fs::path> find_run_dirs(const fs::path& root) {
  std::error_code ec;
  if (!fs::exists(root, ec)) throw RunDirError(root.string() + " does not exist");
  if (!fs::is_directory(root, ec)) throw RunDirError(root.string() + " is not a directory");
  fs::directory_iterator probe(root, ec);
  if (ec) throw RunDirError("cannot read " + root.string() + ": " + ec.message());
  std::vector<fs::path> out;
  collect_run_dirs(root, out, 0);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<size_t, fs::path>> array_task_dirs(const fs::path& run_dir) {
  static const std::regex kTask("task-([0-9]{1,9})");
  std::vector<std::pair<size_t, fs::path>> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::smatch m;
    const std::string name = it->path().filename().string();
    if (!std::regex_match(name, m, kTask) || !fs::is_regular_file(it->path() / "spec.toml")) {
      continue;
    }
    out.emplace_back(std::stoul(m[1].str()), it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

RunSummary summarize_run(const fs::path& dir) {
  RunSummary s;
  s.dir = dir;
  for (const auto& r : read_metrics(dir)) {
    if (r.kind == "train") {
      s.step = r.step;
      s.epoch = r.epoch;
    } else if (r.kind == "eval") {
      const auto it = r.values.find("top1");
      if (it != r.values.end()) s.top1 = it->second;
    }
  }
  const auto attempts = read_attempts(dir);
  s.attempts = count_job_attempts(attempts);
  for (const auto& a : attempts) s.restarts = std::max(s.restarts, a.restart);
  s.checkpoint_step = last_committed_step(dir);
  if (s.checkpoint_step) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(*s.checkpoint_step));
    std::error_code ec;
    const auto written = fs::last_write_time(dir / "checkpoints" / name / "manifest.json", ec);
    if (!ec) {
      s.checkpoint_age_s = std::chrono::duration_cast<std::chrono::seconds>(
                               fs::file_time_type::clock::now() - written)
                               .count();
    }
  }
  try {
    const auto spec = toml::parse(dir / "spec.toml");
    s.max_steps = spec_integer(spec, "train", "max_steps");
    s.epochs = spec_integer(spec, "train", "epochs");
  } catch (const std::exception&) {
    // An unreadable frozen spec leaves the totals unknown; list still shows the rest.
  }
  return s;
}

}  // namespace hpctrain::run
