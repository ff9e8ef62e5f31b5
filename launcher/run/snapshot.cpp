#include "run/snapshot.hpp"

#include <algorithm>
#include <fstream>

#include "common/run_layout.hpp"
#include "run/run_dir.hpp"

namespace hpctrain::run {
namespace {

nlohmann::json object_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return nullptr;
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  return j.is_object() ? j : nlohmann::json(nullptr);
}

}  // namespace

Snapshot read_snapshot(const std::filesystem::path& dir, SnapshotParts parts) {
  Snapshot s;
  s.dir = dir;
  const auto submissions = records::read_submissions(dir);
  if (!submissions.empty()) s.submission = submissions.back();
  s.chain = records::last_chain(submissions);
  // An array run's ledger, metrics and checkpoints are its tasks'.
  const bool array = s.submission && s.submission->array_tasks > 0;
  if (!(array && parts.tasks)) {
    s.attempts = records::read_attempts(dir, &s.malformed_attempts);
    s.metrics = records::read_metrics(dir);
    s.provenance = object_in(dir / "provenance.json");
    s.tracking = object_in(dir / "tracking.json");
    s.checkpoint_step = last_committed_step(dir);
    if (s.checkpoint_step) s.checkpoint_age_s = checkpoint_age_s(dir, *s.checkpoint_step);
  }
  if (parts.spec) {
    try {
      s.spec = read_frozen_spec(dir);
    } catch (const RunDirError& e) {
      s.spec_error = e.what();
    }
  }
  if (array && parts.tasks) {
    for (size_t t = 0; t < s.submission->array_tasks; ++t) {
      Snapshot task = read_snapshot(dir / layout::task_dir_name(t), {parts.spec, false});
      task.task = t;
      s.tasks.push_back(std::move(task));
    }
  }
  return s;
}

int64_t restarts(const std::vector<records::Attempt>& attempts) {
  int64_t out = 0;
  for (const auto& a : attempts) out = std::max(out, a.restart);
  return out;
}

size_t chained_attempts(const std::vector<records::Attempt>& attempts) {
  std::vector<records::Attempt> chained;
  for (const auto& a : attempts) {
    if (records::is_chain(a.reason)) chained.push_back(a);
  }
  return records::count_job_attempts(chained);
}

std::vector<std::string> job_ids(const std::vector<records::Submission>& chain) {
  std::vector<std::string> out;
  for (const auto& s : chain) out.push_back(s.job_id);
  return out;
}

}  // namespace hpctrain::run
