// hpctrain logs RUN_DIR [--follow] [--rank R] [--attempt N] [--task T] [--stderr]: the batch log
// of the run's latest submission, which Slurm appends to across requeues. Attempt N is the one
// whose step supervisor printed "attempt N" (SLURM_RESTART_COUNT N-1, the ledger line with restart
// N-1), as `status` counts restarts; --follow stops once the job is in a terminal Slurm state and
// the file has stopped growing. --rank R shows the rank's lines of the .out and of the .err (where
// every rank but 0 writes most of its lines), and exits 1 naming both when there are none.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/common.hpp"
#include "run/logs.hpp"
#include "slurm/client.hpp"

namespace hpctrain::cli {
namespace {

// A thread that waits for the end of stdin and then raises SIGINT, which the follow's guard
// turns into its stop; it is left blocked in read when the follow ends first.
void end_on_stdin_eof() {
  std::thread([] {
    char buf[256];
    ssize_t got;
    while ((got = ::read(STDIN_FILENO, buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR)) {
    }
    ::kill(::getpid(), SIGINT);
  }).detach();
}

}  // namespace

void add_logs(CLI::App& app) {
  struct Args {
    std::string run_dir;
    bool follow = false;
    bool stderr_file = false;
    std::optional<int64_t> rank, attempt, task;
    double timeout_s = 0;
    bool end_on_stdin_eof = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "logs", "Print a run's batch log across its requeued attempts (docs/run-directory.md)");
  cmd->add_option("run_dir", args->run_dir, "Run directory")->required();
  cmd->add_flag("-f,--follow", args->follow,
                "Keep printing as the log grows, through requeues, until the job has ended in "
                "Slurm and the file has stopped growing (or Ctrl-C)");
  cmd->add_option("--rank", args->rank,
                  "Only the lines of this worker rank ('[rank R/N host]'), from the .out file and "
                  "then from the .err file (each in its order, not interleaved); exit status 1, "
                  "naming the files, when the rank wrote no line to them");
  cmd->add_option("--attempt", args->attempt,
                  "Only attempt N (1 = the first; N-1 is SLURM_RESTART_COUNT, as in status)");
  cmd->add_option("--task", args->task, "The array task whose log to show (job arrays)");
  cmd->add_flag("--stderr", args->stderr_file, "The .err file (stderr) instead of .out");
  cmd->add_option("--timeout", args->timeout_s,
                  "With --follow: stop after this many seconds (0: when the job ends)")
      ->check(CLI::NonNegativeNumber);
  // Not for users: how hpctrain --host ends a follow on the login node when Ctrl-C ends it on
  // the user's machine (ssh closes the remote command's stdin).
  cmd->add_flag("--end-on-stdin-eof", args->end_on_stdin_eof,
                "With --follow: stop, as on Ctrl-C, once stdin is closed")
      ->group("");
  cmd->callback([args, cmd] {
    if (run_remotely(*cmd, Remote::kLogs)) return;
    const run::LogSelection selection{args->rank, args->attempt, args->task, args->stderr_file};
    const auto target = run::resolve_log(args->run_dir, selection);
    if (!target.warning.empty()) std::cerr << "hpctrain: logs: " << target.warning << '\n';
    if (!args->follow) {
      const std::string note = run::print_log(target, selection, std::cout);
      if (!note.empty()) std::cerr << "hpctrain: logs: " << note << '\n';
      return;
    }
    SigintGuard sigint;
    if (args->end_on_stdin_eof) end_on_stdin_eof();
    const auto client = slurm::make_command_client({std::chrono::milliseconds(10000)});
    const std::string stop_note =
        run::follow_log(target, selection, *client, args->timeout_s, sigint_received(), std::cout);
    if (!stop_note.empty()) std::cerr << "hpctrain: logs: " << stop_note << '\n';
  });
}

}  // namespace hpctrain::cli
