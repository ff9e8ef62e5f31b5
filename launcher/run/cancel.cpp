#include "run/cancel.hpp"

#include <algorithm>

#include "common/run_layout.hpp"

namespace hpctrain::run {

std::optional<std::string> job_already_ended(const std::string& job_id,
                                             const std::vector<slurm::JobState>& states,
                                             const std::vector<records::Attempt>& attempts) {
  if (!states.empty()) {
    std::vector<std::string> seen;
    for (const auto& s : states) {
      if (!slurm::is_terminal_state(s.state)) return std::nullopt;
      if (std::find(seen.begin(), seen.end(), s.state) == seen.end()) seen.push_back(s.state);
    }
    std::string words;
    for (const auto& s : seen) words += (words.empty() ? "" : ", ") + s;
    return words + ", per " + states.front().source;
  }
  // Slurm has forgotten the job: the ledger's last line of it says whether it ended.
  const records::Attempt* last = nullptr;
  for (const auto& a : attempts) {
    if (a.job_id == job_id) last = &a;
  }
  if (!last || !records::is_final(last->reason)) return std::nullopt;
  return std::string(records::name_of(last->reason)) + ", per the run's ledger " +
         layout::kAttempts;
}

bool is_already_ended_message(const std::string& text) {
  return text.find("already completing or completed") != std::string::npos;
}

}  // namespace hpctrain::run
