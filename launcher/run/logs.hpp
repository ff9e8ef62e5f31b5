// Reading a run's batch logs (logs/slurm-JOBID.out and .err), which Slurm appends to across
// requeues: where each attempt starts, which rank wrote a line, and `hpctrain logs`' printing and
// following. The step supervisor the batch script hands over to (`hpctrain supervise`) prints
//   hpctrain: job JOBID attempt N on NODES at TIME
// on stdout when attempt N (SLURM_RESTART_COUNT N-1) starts its step, and the worker prefixes its
// lines with "[rank r/N host] ": rank 0 writes its progress to stdout, every rank its warnings and
// errors to stderr, and srun sends every rank's stdout to the .out file and stderr to the .err
// (the sbatch --output/--error options), so the lines of a rank other than 0 are mostly in the
// .err. Thread safety: a LogFilter is not shared between threads; the functions are reentrant.
#pragma once

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>

namespace hpctrain::slurm {
class SlurmClient;
}

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

// What `hpctrain logs` shows: the attempt, rank, array task and file (stdout or stderr) asked for.
struct LogSelection {
  std::optional<int64_t> rank, attempt, task;
  bool stderr_file = false;
};

// The batch log a selection names in the run's latest submission.
struct LogTarget {
  std::string submitted_job_id;  // as sbatch answered ("123"; the array's id for a task)
  std::string job_id;            // the job or task whose log it is ("123", "123_4")
  std::filesystem::path file;    // RUN_DIR/logs/slurm-JOB_ID.out (or .err)
  // With --rank and without --stderr: the .err file, whose lines of that rank are shown too.
  std::filesystem::path err_file;
  // Set when the selection could not be checked fully (the frozen spec does not load, so the
  // ranks are unknown): a line to print before the log.
  std::string warning;
};

// Checks `selection` against the run directory (require_run_dir, its submissions, the frozen
// spec's world size) and names the log. Throws ExitWith (common/exit_codes.hpp): status 2 for a
// selection that does not fit the run (a task of a plain job, a rank beyond the world), 1 for a
// run without a log.
LogTarget resolve_log(const std::filesystem::path& run_dir, const LogSelection& selection);

// Prints the kept lines of the whole log to `out`. With a rank (and without --stderr), the rank's
// lines of the .out file come first, then those of the .err file: each file in its order, the two
// not interleaved in time (nothing in them says when a line was written). The .err has no attempt
// markers, so with --attempt too only the .out's lines are shown, and the returned note (else "")
// says how many lines of the rank the .err holds. Throws ExitWith (status 1) when the file does not
// exist yet, holds fewer attempts than the one selected, or when no line of the rank is in the
// files looked at (the message names them).
std::string print_log(const LogTarget& target, const LogSelection& selection, std::ostream& out);

// Follows the log as it grows, printing kept lines to `out`: polls the file (with a rank and
// without --attempt, the .err file as well, its lines printed as they are read) every 250 ms and
// Slurm every 2 s through `client`. Every wait ends: once the job is in a terminal Slurm state
// (seen by two queries in a row) and the file has stopped growing for a second, after the
// selected attempt, when Slurm has not known the job for 60 s, at `timeout_s` (> 0), or once
// `interrupted` is set (a SIGINT handler's flag; the sleep returns early on a signal). Throws
// ExitWith (status 1) when Slurm has not answered for 5 minutes. Returns why it stopped when that
// is worth saying ("" at the job's end or the attempt's), and that the rank wrote nothing to the
// files followed when it did not.
std::string follow_log(const LogTarget& target, const LogSelection& selection,
                       slurm::SlurmClient& client, double timeout_s,
                       const volatile std::sig_atomic_t& interrupted, std::ostream& out);

}  // namespace hpctrain::run
