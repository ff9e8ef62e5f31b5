#include "run/logs.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "common/exit_codes.hpp"
#include "common/run_layout.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::run {

namespace {

namespace fs = std::filesystem;

// Reads 1 to 9 digits at `pos`, moving past them; nullopt if there are none (or too many).
std::optional<int64_t> read_digits(const std::string& s, size_t& pos) {
  const size_t from = pos;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
  if (pos == from || pos - from > 9) return std::nullopt;
  return std::stoll(s.substr(from, pos - from));
}

bool read_literal(const std::string& s, size_t& pos, const char* literal) {
  const std::string l(literal);
  if (s.compare(pos, l.size(), l) != 0) return false;
  pos += l.size();
  return true;
}

// Reads what `path` holds from `offset` on (nothing if it does not exist yet).
std::string read_from(const fs::path& path, std::uintmax_t& offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<std::uintmax_t>(size) <= offset) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::string chunk(static_cast<size_t>(size) - offset, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  offset += chunk.size();
  return chunk;
}

// Feeds `text` through the filter line by line and prints the kept lines; a last line without
// its newline stays in `partial` unless `flush`.
void emit_lines(std::string& partial, const std::string& text, LogFilter& filter, bool flush,
                std::ostream& out) {
  partial += text;
  size_t start = 0;
  for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = partial.substr(start, end - start);
    if (filter.keep(line)) out << line << '\n';
  }
  partial.erase(0, start);
  if (flush && !partial.empty()) {
    if (filter.keep(partial)) out << partial;
    partial.clear();
  }
  out.flush();
}

void sleep_ms(int ms) {
  // nanosleep returns early on SIGINT, so an interrupt ends the wait at once.
  const struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

}  // namespace

// Parsed by hand rather than with std::regex, whose backtracking recurses once per character and
// can exhaust the stack on a long log line.
std::optional<int64_t> attempt_marker(const std::string& line) {
  size_t pos = 0;
  if (!read_literal(line, pos, "hpctrain: job ")) return std::nullopt;
  const size_t id_from = pos;
  while (pos < line.size() && ((line[pos] >= '0' && line[pos] <= '9') || line[pos] == '_')) ++pos;
  if (pos == id_from || !read_literal(line, pos, " attempt ")) return std::nullopt;
  const auto n = read_digits(line, pos);
  if (!n || !read_literal(line, pos, " on ") || line.find(" at ", pos - 1) == std::string::npos) {
    return std::nullopt;
  }
  return n;
}

std::optional<int64_t> line_rank(const std::string& line) {
  size_t pos = 0;
  if (!read_literal(line, pos, "[rank ")) return std::nullopt;
  const auto rank = read_digits(line, pos);
  if (!rank || !read_literal(line, pos, "/") || !read_digits(line, pos) ||
      !read_literal(line, pos, " ") || line.find("] ", pos) == std::string::npos) {
    return std::nullopt;
  }
  return rank;
}

bool LogFilter::keep(const std::string& line) {
  if (const auto n = attempt_marker(line)) {
    current_ = *n;
    highest_ = std::max(highest_, current_);
  }
  if (attempt_ && current_ != *attempt_) return false;
  if (rank_ && line_rank(line) != rank_) return false;
  return true;
}

LogTarget resolve_log(const fs::path& dir, const LogSelection& sel) {
  require_run_dir(dir);
  const auto submission = last_submission(dir);
  if (!submission) {
    throw ExitWith(kExitFailure, "hpctrain: " + dir.string() + " was never submitted (no " +
                                     layout::kSubmissions + "), so it has no log");
  }
  LogTarget t;
  t.submitted_job_id = submission->job_id;
  t.job_id = submission->job_id;
  fs::path spec_dir = dir;
  if (submission->array_tasks > 0) {
    const std::string tasks = "0.." + std::to_string(submission->array_tasks - 1);
    if (!sel.task) {
      throw ExitWith(kExitBadInput, "hpctrain: " + dir.string() + " is job array " + t.job_id +
                                        " with tasks " + tasks + "; pick one with --task T");
    }
    if (*sel.task < 0 || static_cast<size_t>(*sel.task) >= submission->array_tasks) {
      throw ExitWith(kExitBadInput, "hpctrain: --task " + std::to_string(*sel.task) +
                                        ": job array " + t.job_id + " has tasks " + tasks);
    }
    spec_dir = dir / layout::task_dir_name(static_cast<size_t>(*sel.task));
    t.job_id += "_" + std::to_string(*sel.task);
  } else if (sel.task) {
    throw ExitWith(kExitBadInput, "hpctrain: --task: job " + t.job_id + " is not a job array");
  }
  if (sel.attempt && *sel.attempt < 1) {
    throw ExitWith(kExitBadInput, "hpctrain: --attempt counts from 1 (the first attempt)");
  }
  if (sel.rank) {
    std::optional<int64_t> world;
    try {
      const auto spec = read_frozen_spec(spec_dir);
      world = spec.job.nodes * spec.job.tasks_per_node;
    } catch (const RunDirError& e) {
      t.warning = "cannot check --rank " + std::to_string(*sel.rank) +
                  " against the run's ranks: " + e.what();
    }
    if (*sel.rank < 0 || (world && *sel.rank >= *world)) {
      throw ExitWith(kExitBadInput, "hpctrain: --rank " + std::to_string(*sel.rank) +
                                        ": the run has " +
                                        (world ? std::to_string(*world) : std::string("?")) +
                                        " ranks (job.nodes x job.tasks_per_node in " +
                                        (spec_dir / layout::kSpec).string() + "), numbered from 0");
    }
  }
  t.file = dir / layout::kLogs / layout::log_name(t.job_id, sel.stderr_file);
  if (sel.attempt && sel.stderr_file) {
    throw ExitWith(
        kExitBadInput,
        "hpctrain: --attempt needs the .out file: the batch script marks where each attempt "
        "starts on stdout only");
  }
  return t;
}

void print_log(const LogTarget& target, const LogSelection& sel, std::ostream& out) {
  if (!fs::exists(target.file)) {
    throw ExitWith(kExitFailure, "hpctrain: no log yet: " + target.file.string() +
                                     " does not exist (has job " + target.job_id + " started?)");
  }
  std::uintmax_t offset = 0;
  const std::string text = read_from(target.file, offset);
  if (sel.attempt) {
    // Know the attempts first, to name them when N is not there.
    LogFilter probe(std::nullopt, std::nullopt);
    size_t start = 0;
    for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      probe.keep(text.substr(start, end - start));
    }
    if (*sel.attempt > probe.highest_attempt()) {
      throw ExitWith(kExitFailure, "hpctrain: --attempt " + std::to_string(*sel.attempt) + ": " +
                                       target.file.string() + " holds attempts 1.." +
                                       std::to_string(probe.highest_attempt()));
    }
  }
  LogFilter filter(sel.attempt, sel.rank);
  std::string partial;
  emit_lines(partial, text, filter, /*flush=*/true, out);
}

std::string follow_log(const LogTarget& target, const LogSelection& sel, slurm::SlurmClient& client,
                       double timeout_s, const volatile std::sig_atomic_t& interrupted,
                       std::ostream& out) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kPoll = std::chrono::milliseconds(250);
  constexpr auto kSlurmEvery = std::chrono::seconds(2);
  constexpr auto kQuiet = std::chrono::seconds(1);  // no growth after the end: done
  constexpr auto kUnknownFor = std::chrono::seconds(60);
  constexpr auto kUnreachableFor = std::chrono::minutes(5);
  const auto started = Clock::now();
  LogFilter filter(sel.attempt, sel.rank);
  std::string partial;
  std::uintmax_t offset = 0;
  auto last_growth = Clock::now();
  auto next_query = Clock::now();
  // Since when Slurm has not known the job / not answered; the epoch while it does.
  Clock::time_point unknown_since{}, unreachable_since{};
  std::string ended;       // the terminal state, once seen twice
  std::string last_state;  // the state the previous query saw
  std::string stop_note;
  while (!interrupted) {
    const auto now = Clock::now();
    const std::string chunk = read_from(target.file, offset);
    if (!chunk.empty()) {
      last_growth = now;
      emit_lines(partial, chunk, filter, /*flush=*/false, out);
    }
    if (sel.attempt && filter.current_attempt() > *sel.attempt) break;  // it has ended
    if (!ended.empty() && now - last_growth >= kQuiet) break;
    if (timeout_s > 0 && now - started >= std::chrono::duration<double>(timeout_s)) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
      stop_note = std::string("stopped following after --timeout ") + seconds + " s";
      break;
    }
    if (ended.empty() && now >= next_query) {
      next_query = now + kSlurmEvery;
      try {
        const auto states = client.query(target.submitted_job_id);
        unreachable_since = {};
        const slurm::JobState* mine = nullptr;
        for (const auto& s : states) {
          if (s.job_id == target.job_id) mine = &s;
        }
        if (!mine) {
          if (unknown_since == Clock::time_point{}) unknown_since = now;
          if (now - unknown_since >= kUnknownFor) {
            stop_note =
                "job " + target.job_id + " is unknown to squeue and sacct; stopped following";
            ended = "unknown";
          }
        } else {
          unknown_since = {};
          // A state seen by two queries in a row: a preempted job, say, may be PREEMPTED for a
          // moment before Slurm requeues it.
          if (slurm::is_terminal_state(mine->state) && mine->state == last_state) {
            ended = mine->state;
          }
          last_state = mine->state;
        }
      } catch (const slurm::SlurmError& e) {
        if (unreachable_since == Clock::time_point{}) unreachable_since = now;
        if (now - unreachable_since >= kUnreachableFor) {
          emit_lines(partial, "", filter, /*flush=*/true, out);
          throw ExitWith(kExitFailure, std::string("hpctrain: logs --follow: ") + e.what());
        }
      }
    }
    sleep_ms(static_cast<int>(kPoll.count()));
  }
  emit_lines(partial, read_from(target.file, offset), filter, /*flush=*/true, out);
  if (interrupted) stop_note = "interrupted";
  return stop_note;
}

}  // namespace hpctrain::run
