#include "run/logs.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

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
// its newline stays in `partial` unless `flush`. Returns how many lines it kept.
size_t emit_lines(std::string& partial, const std::string& text, LogFilter& filter, bool flush,
                  std::ostream& out) {
  size_t kept = 0;
  partial += text;
  size_t start = 0;
  for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = partial.substr(start, end - start);
    if (filter.keep(line)) {
      out << line << '\n';
      ++kept;
    }
  }
  partial.erase(0, start);
  if (flush && !partial.empty()) {
    if (filter.keep(partial)) {
      out << partial;
      ++kept;
    }
    partial.clear();
  }
  out.flush();
  return kept;
}

// One log file read as it grows: what was read of it, its unfinished last line, its filter and
// how many lines the filter kept.
struct LogReader {
  LogReader(fs::path file, LogFilter f) : path(std::move(file)), filter(f) {}

  fs::path path;
  LogFilter filter;
  std::uintmax_t offset = 0;
  std::string partial;
  size_t kept = 0;

  // Prints the kept lines of what was added since; returns whether the file grew.
  bool poll(bool flush, std::ostream& out) {
    const std::string chunk = read_from(path, offset);
    kept += emit_lines(partial, chunk, filter, flush, out);
    return !chunk.empty();
  }
};

// "A or B" / "A": the files looked at for a rank.
std::string files_looked_at(const LogTarget& t) {
  return t.err_file.empty() ? t.file.string() : t.file.string() + " or " + t.err_file.string();
}

std::string no_rank_lines(const LogTarget& t, const LogSelection& sel) {
  const std::string r = std::to_string(*sel.rank);
  std::string what = "no line of rank " + r;
  if (sel.attempt) what += " in attempt " + std::to_string(*sel.attempt);
  return what + " in " + files_looked_at(t) + " (the worker starts its lines with '[rank " + r +
         "/N host] ')";
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
  const auto submission = records::last_submission(dir);
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
  if (sel.rank && !sel.stderr_file)
    t.err_file = dir / layout::kLogs / layout::log_name(t.job_id, true);
  if (sel.attempt && sel.stderr_file) {
    throw ExitWith(
        kExitBadInput,
        "hpctrain: --attempt needs the .out file: the batch script marks where each attempt "
        "starts on stdout only");
  }
  return t;
}

std::string print_log(const LogTarget& target, const LogSelection& sel, std::ostream& out) {
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
  size_t kept = emit_lines(partial, text, filter, /*flush=*/true, out);
  if (!sel.rank) return "";
  std::string note;
  if (!target.err_file.empty()) {
    // The .err's lines of the rank: shown after the .out's, or only counted with --attempt.
    std::ostringstream unshown;
    LogReader err(target.err_file, LogFilter(std::nullopt, sel.rank));
    err.poll(/*flush=*/true, sel.attempt ? unshown : out);
    if (!sel.attempt) {
      kept += err.kept;
    } else if (err.kept > 0) {
      note = target.err_file.string() + " holds " + std::to_string(err.kept) +
             (err.kept == 1 ? " more line" : " more lines") + " of rank " +
             std::to_string(*sel.rank) + ", of attempts it does not mark; see them with --rank " +
             std::to_string(*sel.rank) + " --stderr";
    }
  }
  if (kept == 0) throw ExitWith(kExitFailure, "hpctrain: logs: " + no_rank_lines(target, sel));
  return note;
}

namespace {

// What follow_log learns from Slurm, asked every 2 s until the job has ended.
class JobWatch {
 public:
  JobWatch(const LogTarget& target, slurm::SlurmClient& client) : t_(target), client_(client) {}

  // Asks Slurm when it is time to; sets ended() and note(). Throws ExitWith (status 1) when
  // Slurm has not answered for 5 minutes, after `before_throw`.
  template <typename BeforeThrow>
  void poll(std::chrono::steady_clock::time_point now, BeforeThrow before_throw) {
    constexpr auto kSlurmEvery = std::chrono::seconds(2);
    constexpr auto kUnknownFor = std::chrono::seconds(60);
    constexpr auto kUnreachableFor = std::chrono::minutes(5);
    if (!ended_.empty() || now < next_query_) return;
    next_query_ = now + kSlurmEvery;
    try {
      const auto states = client_.query(t_.submitted_job_id);
      unreachable_since_ = {};
      const slurm::JobState* mine = nullptr;
      for (const auto& s : states) {
        if (s.job_id == t_.job_id) mine = &s;
      }
      if (!mine) {
        if (unknown_since_ == Clock::time_point{}) unknown_since_ = now;
        if (now - unknown_since_ >= kUnknownFor) {
          note_ = "job " + t_.job_id + " is unknown to squeue and sacct; stopped following";
          ended_ = "unknown";
        }
        return;
      }
      unknown_since_ = {};
      // A state seen by two queries in a row: a preempted job, say, may be PREEMPTED for a
      // moment before Slurm requeues it.
      if (slurm::is_terminal_state(mine->state) && mine->state == last_state_) {
        ended_ = mine->state;
      }
      last_state_ = mine->state;
    } catch (const slurm::SlurmError& e) {
      if (unreachable_since_ == Clock::time_point{}) unreachable_since_ = now;
      if (now - unreachable_since_ >= kUnreachableFor) {
        before_throw();
        throw ExitWith(kExitFailure, std::string("hpctrain: logs --follow: ") + e.what());
      }
    }
  }
  bool ended() const { return !ended_.empty(); }
  const std::string& note() const { return note_; }

 private:
  using Clock = std::chrono::steady_clock;
  const LogTarget& t_;
  slurm::SlurmClient& client_;
  Clock::time_point next_query_{};
  // Since when Slurm has not known the job / not answered; the epoch while it does.
  Clock::time_point unknown_since_{}, unreachable_since_{};
  std::string ended_;       // the terminal state, once seen twice
  std::string last_state_;  // the state the previous query saw
  std::string note_;
};

}  // namespace

std::string follow_log(const LogTarget& target, const LogSelection& sel, slurm::SlurmClient& client,
                       double timeout_s, const volatile std::sig_atomic_t& interrupted,
                       std::ostream& out) {
  using Clock = std::chrono::steady_clock;
  constexpr auto kPoll = std::chrono::milliseconds(250);
  constexpr auto kQuiet = std::chrono::seconds(1);  // no growth after the end: done
  const auto started = Clock::now();
  // The .out, and with a rank (without --attempt: the .err has no markers) the .err.
  std::vector<LogReader> readers;
  readers.emplace_back(target.file, LogFilter(sel.attempt, sel.rank));
  if (!target.err_file.empty() && !sel.attempt) {
    readers.emplace_back(target.err_file, LogFilter(std::nullopt, sel.rank));
  }
  auto flush_all = [&] {
    for (auto& r : readers) r.poll(/*flush=*/true, out);
  };
  JobWatch watch(target, client);
  auto last_growth = Clock::now();
  std::string stop_note;
  while (!interrupted) {
    const auto now = Clock::now();
    for (auto& r : readers) {
      if (r.poll(/*flush=*/false, out)) last_growth = now;
    }
    if (sel.attempt && readers[0].filter.current_attempt() > *sel.attempt) break;  // it has ended
    if (watch.ended() && now - last_growth >= kQuiet) break;
    if (timeout_s > 0 && now - started >= std::chrono::duration<double>(timeout_s)) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
      stop_note = std::string("stopped following after --timeout ") + seconds + " s";
      break;
    }
    watch.poll(now, flush_all);
    sleep_ms(static_cast<int>(kPoll.count()));
  }
  flush_all();
  if (stop_note.empty()) stop_note = watch.note();
  if (interrupted) stop_note = "interrupted";
  size_t kept = 0;
  for (const auto& r : readers) kept += r.kept;
  if (sel.rank && kept == 0) {
    stop_note += (stop_note.empty() ? "" : "; ") + no_rank_lines(target, sel);
  }
  return stop_note;
}

}  // namespace hpctrain::run
