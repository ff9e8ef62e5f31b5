// Starting programs (common/process.hpp): a Process's status, signals, deadlines, environment
// and streams; run_command's capture, deadline and caps.
#include "common/process.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace hpctrain::common {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Everything a child writes to `fd` until it closes it.
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fd, buf, sizeof buf)) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0) out.append(buf, got);
  }
  return out;
}

ProcessOptions piped_stdout() {
  return {std::nullopt, Stdio::kNull, Stdio::kPipe, Stdio::kInherit};
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST(Process, ExitStatus) {
  Process p({"sh", "-c", "exit 3"});
  ASSERT_TRUE(p.started());
  EXPECT_EQ(p.wait(), 3);
  EXPECT_EQ(p.poll(), 3) << "the status stays once collected";
  EXPECT_EQ(Process({"true"}).wait(), 0);
}

TEST(Process, SignalEndsTheChildWith128PlusTheSignal) {
  Process p({"sleep", "30"});
  EXPECT_FALSE(p.poll());
  p.signal(SIGTERM);
  EXPECT_EQ(p.wait(), 128 + SIGTERM);
  p.signal(SIGKILL);  // reaped: nothing is sent, its pid may be another's
  EXPECT_EQ(p.poll(), 128 + SIGTERM);
}

TEST(Process, WaitForKeepsItsDeadline) {
  Process p({"sleep", "30"});
  const auto start = Clock::now();
  EXPECT_FALSE(p.wait_for(300ms));
  const auto waited = Clock::now() - start;
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 3s);
  p.signal(SIGKILL);
  EXPECT_EQ(p.wait_for(10s), 128 + SIGKILL);
  // A child that ends early ends the wait early.
  Process quick({"sh", "-c", "sleep 0.2; exit 4"});
  const auto quick_start = Clock::now();
  EXPECT_EQ(quick.wait_for(20s), 4);
  EXPECT_LT(Clock::now() - quick_start, 5s);
}

TEST(Process, DroppedChildIsKilledAndReapedUnlessDetached) {
  pid_t pid = -1;
  {
    Process p({"sleep", "30"});
    pid = p.pid();
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(alive(pid));
  }
  EXPECT_FALSE(alive(pid)) << "killed and reaped: not even a zombie is left";
  {
    Process p({"sleep", "30"});
    pid = p.pid();
    p.detach();
  }
  EXPECT_TRUE(alive(pid)) << "a detached child runs on";
  ::kill(pid, SIGKILL);
  int raw = 0;
  EXPECT_EQ(::waitpid(pid, &raw, 0), pid);
}

TEST(Process, MovedProcessOwnsTheChild) {
  Process a({"sh", "-c", "exit 5"});
  const pid_t pid = a.pid();
  Process b(std::move(a));
  EXPECT_EQ(b.pid(), pid);
  EXPECT_FALSE(a.started());  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.wait(), 5);
  Process c({"sleep", "30"});
  const pid_t sleeper = c.pid();
  c = std::move(b);  // the sleeper c held is killed and reaped
  EXPECT_FALSE(alive(sleeper));
  EXPECT_EQ(c.poll(), 5);
}

TEST(Process, ProgramThatCannotStart) {
  Process p({"/nonexistent/srun", "--x"});
  EXPECT_FALSE(p.started());
  EXPECT_EQ(p.pid(), -1);
  EXPECT_NE(p.error().find("No such file"), std::string::npos) << p.error();
  EXPECT_EQ(p.poll(), kStatusNotStarted);
  EXPECT_EQ(p.wait(), kStatusNotStarted);
  EXPECT_FALSE(Process({"no-such-program-on-path-hpctrain"}).started());
  EXPECT_THROW(Process({}), std::invalid_argument);
  EXPECT_THROW(Process({"cat"}, {std::nullopt, Stdio::kPipe, Stdio::kInherit, Stdio::kInherit}),
               std::invalid_argument);
}

TEST(Process, EnvironmentReplacesOrAdds) {
  ::setenv("HPCTRAIN_PROCESS_TEST_A", "old", 1);
  ::setenv("HPCTRAIN_PROCESS_TEST_B", "kept", 1);
  const auto env =
      environment_with({"HPCTRAIN_PROCESS_TEST_A=new", "HPCTRAIN_PROCESS_TEST_C=added"});
  EXPECT_EQ(std::count_if(
                env.begin(), env.end(),
                [](const std::string& v) { return v.rfind("HPCTRAIN_PROCESS_TEST_A=", 0) == 0; }),
            1);
  auto options = piped_stdout();
  options.env = env;
  Process p({"sh", "-c",
             "printf '%s %s %s' \"$HPCTRAIN_PROCESS_TEST_A\" \"$HPCTRAIN_PROCESS_TEST_B\" "
             "\"$HPCTRAIN_PROCESS_TEST_C\""},
            options);
  EXPECT_EQ(read_all(p.out_fd()), "new kept added");
  EXPECT_EQ(p.wait(), 0);
  // A whole environment of its own: nothing of this process's.
  options.env = std::vector<std::string>{"ONLY=1"};
  Process bare({"/usr/bin/env"}, options);
  EXPECT_EQ(read_all(bare.out_fd()), "ONLY=1\n");
  EXPECT_EQ(bare.wait(), 0);
  ::unsetenv("HPCTRAIN_PROCESS_TEST_A");
  ::unsetenv("HPCTRAIN_PROCESS_TEST_B");
}

TEST(Process, StreamsArePipedOrNull) {
  Process p({"sh", "-c", "echo out; echo err >&2"},
            {std::nullopt, Stdio::kNull, Stdio::kPipe, Stdio::kPipe});
  EXPECT_EQ(read_all(p.out_fd()), "out\n");
  EXPECT_EQ(read_all(p.err_fd()), "err\n");
  EXPECT_EQ(p.wait(), 0);
  // stdin from /dev/null: cat ends at once, with nothing to say.
  Process cat({"cat"}, piped_stdout());
  EXPECT_EQ(cat.err_fd(), -1);
  EXPECT_EQ(read_all(cat.out_fd()), "");
  EXPECT_EQ(cat.wait_for(10s), 0);
  // stdout to /dev/null: nothing comes through stderr's pipe but stderr's words.
  Process quiet({"sh", "-c", "echo lost; echo kept >&2"},
                {std::nullopt, Stdio::kNull, Stdio::kNull, Stdio::kPipe});
  EXPECT_EQ(quiet.out_fd(), -1);
  EXPECT_EQ(read_all(quiet.err_fd()), "kept\n");
  EXPECT_EQ(quiet.wait(), 0);
}

// hpctrain --host sends the spec as ssh's stdin, fills the report's copy from its stdout and ends
// a remote `logs -f` by closing the pipe it reads.
TEST(Process, StdinAndStdoutFromTheCallersDescriptors) {
  int to_child[2], from_child[2];
  ASSERT_EQ(::pipe2(to_child, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(from_child, O_CLOEXEC), 0);
  ProcessOptions options;
  options.stdin_from = to_child[0];
  options.stdout_to = from_child[1];
  Process cat({"cat"}, options);
  ::close(to_child[0]);
  ::close(from_child[1]);
  EXPECT_EQ(cat.out_fd(), -1) << "stdout is the caller's descriptor, not a pipe of the Process";
  ASSERT_EQ(::write(to_child[1], "spec\n", 5), 5);
  EXPECT_FALSE(cat.wait_for(200ms)) << "cat ended while its stdin was still open";
  ::close(to_child[1]);  // the end of its input ends it
  EXPECT_EQ(read_all(from_child[0]), "spec\n");
  EXPECT_EQ(cat.wait_for(10s), 0);
  ::close(from_child[0]);
}
TEST(RunCommand, CapturesOutputAndStatus) {
  const auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"}, 10s);
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.not_found);
}

TEST(RunCommand, ArgumentsAreNotInterpretedByAShell) {
  const auto r = run_command({"printf", "%s", "$(id); `id` | x"}, 10s);
  EXPECT_EQ(r.out, "$(id); `id` | x");
}

TEST(RunCommand, DeadlineKillsAHangingChild) {
  const auto start = Clock::now();
  const auto r = run_command({"sleep", "30"}, 300ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_status, 128 + SIGTERM);
  EXPECT_LT(Clock::now() - start, 5s);
  // A child that ignores TERM still ends, by KILL, two seconds later.
  const auto r2 = run_command({"sh", "-c", "trap '' TERM; sleep 30"}, 300ms);
  EXPECT_TRUE(r2.timed_out);
  EXPECT_EQ(r2.exit_status, 128 + SIGKILL);
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST(RunCommand, MissingProgramIsReported) {
  const auto r = run_command({"/nonexistent/sbatch"}, 1s);
  EXPECT_TRUE(r.not_found);
  EXPECT_EQ(r.exit_status, -1);
  EXPECT_NE(r.err.find("/nonexistent/sbatch: "), std::string::npos) << r.err;
}

TEST(RunCommand, OutputBeyondTheCapIsDropped) {
  // The child writes far more than a pipe holds: it must not block on the dropped part.
  const auto r = run_command(
      {"sh", "-c",
       "head -c 200000 /dev/zero | tr '\\0' o; head -c 100000 /dev/zero | tr '\\0' e >&2"},
      10s, /*max_output=*/1000);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, std::string(1000, 'o'));
  EXPECT_EQ(r.err, std::string(1000, 'e'));
}

TEST(RunCommand, StdinIsNull) {
  const auto r = run_command({"cat"}, 10s);
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace hpctrain::common
