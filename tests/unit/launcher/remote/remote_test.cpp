// The login node's shell command for hpctrain --host (remote/remote.hpp), run here by each shell a
// login node may have (sh, bash, and zsh where installed) with a recorder standing in for
// hpctrain: every argument arrives word for word whatever it holds, none runs as code; the spec
// sent on stdin is the file the command is given, below a staging folder that is gone
// afterwards; the status passes through; a fetched file comes on stdout. No ssh: cli_remote.sh
// runs the same through a real sshd.
#include "remote/remote.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "render/render.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::remote {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t end; (end = text.find('\0', start)) != std::string::npos; start = end + 1) {
    out.push_back(text.substr(start, end - start));
  }
  return out;
}

std::vector<std::string> shells() {
  std::vector<std::string> out;
  for (const char* sh : {"/bin/sh", "/bin/bash", "/bin/zsh", "/usr/bin/zsh"}) {
    if (::access(sh, X_OK) == 0) out.emplace_back(sh);
  }
  return out;
}

// A temp folder holding the recorder (in a folder whose name is itself hostile), where it writes
// its argv (NUL-separated), its working directory and a copy of its last argument's file.
class RemoteScript : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = dir_ / "bin 'q' $(touch pwned) `x`";
    fs::create_directories(bin_);
    fs::create_directories(dir_ / "tmp");
    target_.program = (bin_ / "hpctrain").string();
    std::ofstream(target_.program)
        << "#!/bin/sh\nout=" << render::shell_quote(dir_.path().string())
        << "\npwd > \"$out/cwd\"\nprintf '%s\\0' \"$0\" \"$@\" > \"$out/argv\"\n"
           "for a; do last=$a; done\n[ -f \"$last\" ] && cp -- \"$last\" \"$out/staged\"\n"
           "echo recorder-stdout\nexit 3\n";
    fs::permissions(target_.program, fs::perms::owner_all);
    target_.host = "login";
  }
  // Runs the call's script with `shell` as ssh's remote side would; stdin from `stdin_file`.
  int run(const std::string& shell, const Call& call, const fs::path& stdin_file = {},
          std::string* out = nullptr) {
    common::ProcessOptions options;
    options.env = common::environment_with({"TMPDIR=" + (dir_ / "tmp").string()});
    options.in = common::Stdio::kNull;
    options.out = out ? common::Stdio::kPipe : common::Stdio::kNull;
    UniqueFd in;
    if (!stdin_file.empty()) {
      in.reset(::open(stdin_file.c_str(), O_RDONLY | O_CLOEXEC));
      options.stdin_from = in.get();
    }
    common::Process p({shell, "-c", remote_script(target_, call)}, options);
    if (out) {
      char buf[4096];
      ssize_t got;
      while ((got = ::read(p.out_fd(), buf, sizeof buf)) > 0) out->append(buf, got);
    }
    return p.wait_for(30s).value_or(-1);
  }
  std::vector<std::string> recorded() { return split_nul(read_file(dir_ / "argv")); }

  test::TempDir dir_;
  fs::path bin_;
  Target target_;
};

const std::vector<std::string> kHostile = {"it's",
                                           "$(touch pwned)",
                                           "`touch pwned`",
                                           "a;touch pwned",
                                           "*",
                                           "?",
                                           "a\nb",
                                           "ünï",
                                           " lead",
                                           "trail ",
                                           "",
                                           "\\",
                                           "\"",
                                           "'",
                                           "''",
                                           "-x",
                                           "$HOME",
                                           "!x",
                                           "#c",
                                           "~",
                                           "a&&b",
                                           "{a,b}",
                                           ">pwned",
                                           "|cat",
                                           "${x:-y}",
                                           "\t"};

TEST_F(RemoteScript, EveryWordArrivesAsGivenInEveryShell) {
  Call call;
  call.args = {"status", "--json"};
  call.args.insert(call.args.end(), kHostile.begin(), kHostile.end());
  std::vector<std::string> want{target_.program};
  want.insert(want.end(), call.args.begin(), call.args.end());
  for (const auto& shell : shells()) {
    fs::remove(dir_ / "argv");
    EXPECT_EQ(run(shell, call), 3) << shell << ": the command's status passes through";
    EXPECT_EQ(recorded(), want) << shell;
  }
  EXPECT_FALSE(fs::exists(fs::current_path() / "pwned"));
  EXPECT_FALSE(fs::exists(bin_ / "pwned"));
}

TEST_F(RemoteScript, TheSpecLandsAtItsPathInAStagingFolderThatGoesAway) {
  const std::string spec = "[job]\nname = \"it's $(touch pwned)\"\n";
  std::ofstream(dir_ / "spec.toml") << spec;
  Call call;
  call.staged_spec = "sub 'q' $(touch pwned)/we`x`;*\n ü.toml";
  call.args = {"check", "--offline", "--", *call.staged_spec};
  for (const auto& shell : shells()) {
    fs::remove(dir_ / "staged");
    EXPECT_EQ(run(shell, call, dir_ / "spec.toml"), 3) << shell;
    const auto argv = recorded();
    ASSERT_EQ(argv.size(), 6u) << shell;
    EXPECT_EQ(argv[2], "--paths-relative-to=" + fs::current_path().string())
        << shell << ": relative paths start where the shell started";
    EXPECT_EQ(argv[5], *call.staged_spec) << shell;
    EXPECT_EQ(read_file(dir_ / "staged"), spec) << shell << ": the spec arrived";
    const fs::path cwd = read_file(dir_ / "cwd").substr(0, read_file(dir_ / "cwd").size() - 1);
    EXPECT_EQ(cwd.parent_path(), dir_ / "tmp") << shell << ": staged under TMPDIR";
    EXPECT_TRUE(fs::is_empty(dir_ / "tmp")) << shell << ": the staging folder is left behind";
  }
  // The user's own --paths-relative-to: none added.
  call.relative_to_cwd = false;
  EXPECT_EQ(run("/bin/sh", call, dir_ / "spec.toml"), 3);
  EXPECT_EQ(recorded().size(), 5u);
}

TEST_F(RemoteScript, RemoteDirAndFetchedFile) {
  const fs::path odd = dir_ / "run 'q' $(touch pwned) ü";
  fs::create_directories(odd);
  std::ofstream(odd / "report.html") << "<html>page</html>";
  target_.dir = odd.string();
  Call call;
  call.args = {"report", "--", "."};
  call.fetch = "report.html";
  // The recorder ends 3: nothing is fetched, the status passes.
  std::string out;
  EXPECT_EQ(run("/bin/sh", call, {}, &out), 3);
  EXPECT_EQ(out, "") << "the command's stdout goes to stderr";
  EXPECT_EQ(read_file(dir_ / "cwd"), odd.string() + "\n");
  // A command that succeeds: its page on stdout, nothing else.
  target_.program = "true";
  EXPECT_EQ(run("/bin/sh", call, {}, &out), 0);
  EXPECT_EQ(out, "<html>page</html>");
  target_.dir = (dir_ / "missing").string();
  EXPECT_EQ(run("/bin/sh", call), 2) << "a missing --remote-dir is bad input";
}

TEST(Remote, MissingProgramAndSshFailuresAreExplained) {
  Target target;
  target.host = "login";
  target.program = "/nowhere/hpctrain";
  Call call;
  call.args = {"list"};
  common::Process p(
      {"/bin/sh", "-c", remote_script(target, call)},
      {std::nullopt, common::Stdio::kNull, common::Stdio::kNull, common::Stdio::kNull});
  const int status = p.wait_for(30s).value_or(-1);
  EXPECT_EQ(status, 127);
  const auto why = explain_status(target, status);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("/nowhere/hpctrain was not found on login"), std::string::npos) << *why;
  EXPECT_NE(why->find("--remote-hpctrain"), std::string::npos) << *why;
  const auto ssh = explain_status(target, kExitSshFailed);
  ASSERT_TRUE(ssh);
  EXPECT_NE(ssh->find("ssh to login failed"), std::string::npos) << *ssh;
  EXPECT_FALSE(explain_status(target, 0));
  EXPECT_FALSE(explain_status(target, 2)) << "hpctrain's own statuses pass through unexplained";
}

TEST(Remote, SshArgvPutsTheHostAfterDoubleDash) {
  Target target;
  target.host = "login";
  target.ssh = "/usr/bin/ssh";
  Call call;
  call.args = {"list"};
  const auto argv = ssh_argv(target, call);
  ASSERT_GE(argv.size(), 4u);
  EXPECT_EQ(argv.front(), "/usr/bin/ssh");
  EXPECT_EQ(argv[argv.size() - 3], "--");
  EXPECT_EQ(argv[argv.size() - 2], "login");
  EXPECT_EQ(argv.back(), remote_script(target, call)) << "one argument: ssh joins no words";
  EXPECT_NE(std::find(argv.begin(), argv.end(), "-T"), argv.end()) << "no tty";
}

}  // namespace
}  // namespace hpctrain::remote
