// dist/stack_dump.hpp: what a hung rank prints of its threads, with stand-ins for gdb (the real
// one's output depends on the machine and whether it may attach).
#include "dist/stack_dump.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "support/temp_dir.hpp"

namespace hpctrain::dist {
namespace {

using namespace std::chrono_literals;

// An executable shell script at dir/name.
std::string script(const test::TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.file(name);
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(StackDump, GdbsOutputUnderOneLineSayingWhose) {
  test::TempDir dir;
  const std::string gdb = script(dir, "gdb", "echo \"args: $*\"");
  const std::string text = thread_stacks(10s, gdb);
  EXPECT_NE(text.find("the threads of this rank, as gdb sees them:\nargs: -p " +
                      std::to_string(::getpid()) +
                      " -batch -nx -ex set pagination off -ex thread apply all bt\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("gdb exited"), std::string::npos) << text;
}

TEST(StackDump, AFailingGdbSaysHowWithItsFirstLine) {
  test::TempDir dir;
  const std::string gdb = script(dir, "gdb",
                                 "echo '#0 partial'; echo 'ptrace: Operation not permitted.' >&2; "
                                 "echo 'second line' >&2; exit 3");
  const std::string text = thread_stacks(10s, gdb);
  EXPECT_NE(text.find("#0 partial\n"), std::string::npos) << text;
  const std::string tail = "gdb exited 3: ptrace: Operation not permitted.\n";
  ASSERT_GE(text.size(), tail.size()) << text;
  EXPECT_EQ(text.substr(text.size() - tail.size()), tail) << text;
}

TEST(StackDump, ATimedOutGdbSaysSo) {
  test::TempDir dir;
  const std::string gdb = script(dir, "gdb", "exec sleep 30");
  const auto started = std::chrono::steady_clock::now();
  const std::string text = thread_stacks(1s, gdb);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_NE(text.find("gdb timed out: "), std::string::npos) << text;
}

TEST(StackDump, NoGdbIsOneLine) {
  const std::string text = thread_stacks(10s, "hpctrain-no-such-gdb");
  EXPECT_NE(text.find("no stacks: hpctrain-no-such-gdb is not on PATH\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("as gdb sees them"), std::string::npos) << text;
}

}  // namespace
}  // namespace hpctrain::dist
