// Reading a run's batch log (logs/slurm-JOBID.out), which Slurm appends to across requeues: where
// each attempt starts and which rank wrote a line. The batch script (sbatch/job.sbatch.in) prints
//   hpctrain: job JOBID attempt N on NODES at TIME
// when attempt N (SLURM_RESTART_COUNT N-1) starts its step, and the worker prefixes its lines with
// "[rank r/N host] ". Thread safety: a LogFilter is not shared between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hpctrain::run {

// N of an attempt marker line, or nullopt for any other line.
std::optional<int64_t> attempt_marker(const std::string& line);

// The rank of a line that starts with "[rank r/N ", or nullopt.
std::optional<int64_t> line_rank(const std::string& line);

// Keeps the lines of one attempt and/or one rank, fed one whole line (without its newline) at a
// time in file order. Lines before the first marker (an attempt that failed before its step
// started, or the setup of attempt 1) count as attempt 1. With a rank, only the worker's lines of
// that rank are kept: the script's own lines and srun's carry no rank.
class LogFilter {
 public:
  LogFilter(std::optional<int64_t> attempt, std::optional<int64_t> rank)
      : attempt_(attempt), rank_(rank) {}

  bool keep(const std::string& line);
  // The attempt the last line fed belongs to; the highest seen.
  int64_t current_attempt() const { return current_; }
  int64_t highest_attempt() const { return highest_; }

 private:
  std::optional<int64_t> attempt_, rank_;
  int64_t current_ = 1;
  int64_t highest_ = 1;
};

}  // namespace hpctrain::run
