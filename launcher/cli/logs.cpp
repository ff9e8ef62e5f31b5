// hpctrain logs RUN_DIR [--follow] [--rank R] [--attempt N] [--task T] [--stderr]: the batch log
// of the run's latest submission, which Slurm appends to across requeues. Attempt N is the one
// whose batch script printed "attempt N" (SLURM_RESTART_COUNT N-1, the ledger line with restart
// N-1), as `status` counts restarts; --follow stops once the job is in a terminal Slurm state and
// the file has stopped growing.
#include <signal.h>
#include <time.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <toml.hpp>

#include "cli/common.hpp"
#include "run/logs.hpp"
#include "run/run_dir.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_logs_interrupted = 0;

extern "C" void logs_on_sigint(int) { g_logs_interrupted = 1; }

// SIGINT sets a flag for the duration of a follow; the previous handler comes back after.
class SigintFlag {
 public:
  SigintFlag() {
    struct sigaction action {};
    action.sa_handler = logs_on_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_);
  }
  ~SigintFlag() { sigaction(SIGINT, &previous_, nullptr); }
  SigintFlag(const SigintFlag&) = delete;
  SigintFlag& operator=(const SigintFlag&) = delete;

 private:
  struct sigaction previous_ {};
};

// The number of ranks of the frozen spec (job.nodes x job.tasks_per_node), if it says.
std::optional<int64_t> logs_world_size(const fs::path& spec) {
  try {
    const auto v = toml::parse(spec);
    const auto& job = v.at("job");
    return static_cast<int64_t>(job.at("nodes").as_integer() *
                                job.at("tasks_per_node").as_integer());
  } catch (const std::exception&) {
    return std::nullopt;
  }
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
void emit_lines(std::string& partial, const std::string& text, run::LogFilter& filter, bool flush) {
  partial += text;
  size_t start = 0;
  for (size_t end; (end = partial.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = partial.substr(start, end - start);
    if (filter.keep(line)) std::cout << line << '\n';
  }
  partial.erase(0, start);
  if (flush && !partial.empty()) {
    if (filter.keep(partial)) std::cout << partial;
    partial.clear();
  }
  std::cout.flush();
}

void sleep_ms(int ms) {
  // nanosleep returns early on SIGINT, so an interrupt ends the wait at once.
  const struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

}  // namespace

void add_logs(CLI::App& app) {
  struct Args {
    std::string run_dir;
    bool follow = false;
    bool stderr_file = false;
    std::optional<int64_t> rank, attempt, task;
    double timeout_s = 0;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "logs", "Print a run's batch log across its requeued attempts (docs/run-directory.md)");
  cmd->add_option("run_dir", args->run_dir, "Run directory")->required();
  cmd->add_flag("-f,--follow", args->follow,
                "Keep printing as the log grows, through requeues, until the job has ended in "
                "Slurm and the file has stopped growing (or Ctrl-C)");
  cmd->add_option("--rank", args->rank, "Only the lines of this worker rank ('[rank R/N host]')");
  cmd->add_option("--attempt", args->attempt,
                  "Only attempt N (1 = the first; N-1 is SLURM_RESTART_COUNT, as in status)");
  cmd->add_option("--task", args->task, "The array task whose log to show (job arrays)");
  cmd->add_flag("--stderr", args->stderr_file, "The .err file (stderr) instead of .out");
  cmd->add_option("--timeout", args->timeout_s,
                  "With --follow: stop after this many seconds (0: when the job ends)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([args] {
    const fs::path dir = args->run_dir;
    if (!fs::exists(dir / "spec.toml")) {
      throw Exit(kExitFailure, "hpctrain: " + args->run_dir +
                                   " is not a run directory (no spec.toml); see hpctrain submit");
    }
    const auto submission = run::last_submission(dir);
    if (!submission) {
      throw Exit(kExitFailure, "hpctrain: " + args->run_dir +
                                   " was never submitted (no submissions.jsonl), so it has no log");
    }
    std::string job_id = submission->job_id;
    fs::path spec = dir / "spec.toml";
    if (submission->array_tasks > 0) {
      const std::string tasks = "0.." + std::to_string(submission->array_tasks - 1);
      if (!args->task) {
        throw Exit(kExitBadInput, "hpctrain: " + args->run_dir + " is job array " + job_id +
                                      " with tasks " + tasks + "; pick one with --task T");
      }
      if (*args->task < 0 || static_cast<size_t>(*args->task) >= submission->array_tasks) {
        throw Exit(kExitBadInput, "hpctrain: --task " + std::to_string(*args->task) +
                                      ": job array " + job_id + " has tasks " + tasks);
      }
      char name[32];
      std::snprintf(name, sizeof name, "task-%03lld", static_cast<long long>(*args->task));
      spec = dir / name / "spec.toml";
      job_id += "_" + std::to_string(*args->task);
    } else if (args->task) {
      throw Exit(kExitBadInput, "hpctrain: --task: job " + job_id + " is not a job array");
    }
    if (args->attempt && *args->attempt < 1) {
      throw Exit(kExitBadInput, "hpctrain: --attempt counts from 1 (the first attempt)");
    }
    if (args->rank) {
      const auto world = logs_world_size(spec);
      if (*args->rank < 0 || (world && *args->rank >= *world)) {
        throw Exit(kExitBadInput, "hpctrain: --rank " + std::to_string(*args->rank) +
                                      ": the run has " +
                                      (world ? std::to_string(*world) : std::string("?")) +
                                      " ranks (job.nodes x job.tasks_per_node in " + spec.string() +
                                      "), numbered from 0");
      }
    }
    const fs::path log = dir / "logs" / ("slurm-" + job_id + (args->stderr_file ? ".err" : ".out"));
    if (args->attempt && args->stderr_file) {
      throw Exit(kExitBadInput,
                 "hpctrain: --attempt needs the .out file: the batch script marks where each "
                 "attempt starts on stdout only");
    }

    if (!args->follow) {
      if (!fs::exists(log)) {
        throw Exit(kExitFailure, "hpctrain: no log yet: " + log.string() +
                                     " does not exist (has job " + job_id + " started?)");
      }
      std::uintmax_t offset = 0;
      const std::string text = read_from(log, offset);
      if (args->attempt) {
        // Know the attempts first, to name them when N is not there.
        run::LogFilter probe(std::nullopt, std::nullopt);
        size_t start = 0;
        for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
          probe.keep(text.substr(start, end - start));
        }
        if (*args->attempt > probe.highest_attempt()) {
          throw Exit(kExitFailure, "hpctrain: --attempt " + std::to_string(*args->attempt) + ": " +
                                       log.string() + " holds attempts 1.." +
                                       std::to_string(probe.highest_attempt()));
        }
      }
      run::LogFilter filter(args->attempt, args->rank);
      std::string partial;
      emit_lines(partial, text, filter, /*flush=*/true);
      return;
    }

    // Follow: poll the file every 250 ms and Slurm every 2 s. Every wait ends: at the job's end,
    // when Slurm has not known the job for 60 s or not answered for 5 minutes, at --timeout, or on
    // SIGINT.
    constexpr auto kPoll = std::chrono::milliseconds(250);
    constexpr auto kSlurmEvery = std::chrono::seconds(2);
    constexpr auto kQuiet = std::chrono::seconds(1);  // no growth after the end: done
    constexpr auto kUnknownFor = std::chrono::seconds(60);
    constexpr auto kUnreachableFor = std::chrono::minutes(5);
    g_logs_interrupted = 0;
    SigintFlag sigint;
    const auto started = Clock::now();
    const auto client = slurm::make_command_client({std::chrono::milliseconds(10000)});
    run::LogFilter filter(args->attempt, args->rank);
    std::string partial;
    std::uintmax_t offset = 0;
    auto last_growth = Clock::now();
    auto next_query = Clock::now();
    // Since when Slurm has not known the job / not answered; the epoch while it does.
    Clock::time_point unknown_since{}, unreachable_since{};
    std::string ended;       // the terminal state, once seen twice
    std::string last_state;  // the state the previous query saw
    std::string stop_note;
    while (!g_logs_interrupted) {
      const auto now = Clock::now();
      const std::string chunk = read_from(log, offset);
      if (!chunk.empty()) {
        last_growth = now;
        emit_lines(partial, chunk, filter, /*flush=*/false);
      }
      if (args->attempt && filter.current_attempt() > *args->attempt) break;  // it has ended
      if (!ended.empty() && now - last_growth >= kQuiet) break;
      if (args->timeout_s > 0 && now - started >= std::chrono::duration<double>(args->timeout_s)) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", args->timeout_s);
        stop_note = std::string("stopped following after --timeout ") + seconds + " s";
        break;
      }
      if (ended.empty() && now >= next_query) {
        next_query = now + kSlurmEvery;
        try {
          const auto states = client->query(submission->job_id);
          unreachable_since = {};
          const slurm::JobState* mine = nullptr;
          for (const auto& s : states) {
            if (s.job_id == job_id) mine = &s;
          }
          if (!mine) {
            if (unknown_since == Clock::time_point{}) unknown_since = now;
            if (now - unknown_since >= kUnknownFor) {
              stop_note = "job " + job_id + " is unknown to squeue and sacct; stopped following";
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
            emit_lines(partial, "", filter, /*flush=*/true);
            throw Exit(kExitFailure, std::string("hpctrain: logs --follow: ") + e.what());
          }
        }
      }
      sleep_ms(static_cast<int>(kPoll.count()));
    }
    emit_lines(partial, read_from(log, offset), filter, /*flush=*/true);
    if (g_logs_interrupted) stop_note = "interrupted";
    if (!stop_note.empty()) std::cerr << "hpctrain: logs: " << stop_note << '\n';
  });
}

}  // namespace hpctrain::cli
