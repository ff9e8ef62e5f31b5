#include "run/listing.hpp"

#include <algorithm>

#include "common/run_layout.hpp"

namespace hpctrain::run {
namespace {

bool is_run_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / layout::kSpec, ec) &&
         fs::is_regular_file(dir / layout::kScript, ec);
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
  std::vector<std::pair<size_t, fs::path>> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto task = layout::parse_task_dir_name(it->path().filename().string());
    if (!task || !fs::is_regular_file(it->path() / layout::kSpec)) continue;
    out.emplace_back(*task, it->path());
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
  if (s.checkpoint_step) s.checkpoint_age_s = checkpoint_age_s(dir, *s.checkpoint_step);
  try {
    const auto spec = read_frozen_spec(dir);
    s.max_steps = spec.train.max_steps;
    s.epochs = spec.train.epochs;
  } catch (const RunDirError& e) {
    s.spec_error = e.what();
  }
  return s;
}

}  // namespace hpctrain::run
