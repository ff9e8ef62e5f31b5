#include "common/run_layout.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace hpctrain::layout {
namespace {

bool all_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string replaced_spec_name(int n) {
  return std::string(kSpec) + ".replaced-" + std::to_string(n);
}

std::string task_dir_name(std::size_t task) {
  char name[32];
  std::snprintf(name, sizeof name, "task-%03zu", task);
  return name;
}

std::optional<std::size_t> parse_task_dir_name(std::string_view name) {
  constexpr std::string_view kPrefix = "task-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (!all_digits(digits) || digits.size() > 9) return std::nullopt;
  return static_cast<std::size_t>(std::stoull(std::string(digits)));
}

std::string log_name(const std::string& job_id, bool stderr_file) {
  return "slurm-" + job_id + (stderr_file ? ".err" : ".out");
}

std::string checkpoint_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%09" PRId64, step);
  return name;
}

std::optional<int64_t> parse_checkpoint_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (!all_digits(digits) || digits.size() > 18) return std::nullopt;
  const int64_t step = std::stoll(std::string(digits));
  if (checkpoint_name(step) != name) return std::nullopt;
  return step;
}

std::string checkpoint_temp_name(int64_t step) { return "." + checkpoint_name(step) + ".tmp"; }

std::optional<int64_t> parse_checkpoint_temp_name(std::string_view name) {
  constexpr std::string_view kSuffix = ".tmp";
  if (name.size() < kSuffix.size() + 1 || name[0] != '.' ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return std::nullopt;
  }
  return parse_checkpoint_name(name.substr(1, name.size() - 1 - kSuffix.size()));
}

std::string checkpoint_retired_name(int64_t step, int k) {
  return "." + checkpoint_name(step) + ".retired-" + std::to_string(k);
}

std::optional<int64_t> parse_checkpoint_retired_name(std::string_view name) {
  constexpr std::string_view kMark = ".retired-";
  const size_t mark = name.rfind(kMark);
  if (name.empty() || name[0] != '.' || mark == std::string_view::npos || mark < 1) {
    return std::nullopt;
  }
  const std::string_view k = name.substr(mark + kMark.size());
  if (k.size() > 9 || !all_digits(k)) return std::nullopt;
  return parse_checkpoint_name(name.substr(1, mark - 1));
}

std::filesystem::path checkpoint_manifest(const std::filesystem::path& run_dir, int64_t step) {
  return run_dir / kCheckpoints / checkpoint_name(step) / kManifest;
}

}  // namespace hpctrain::layout
