// Running hpctrain's commands on a login node over the user's own ssh (hpctrain --host,
// docs/quickstart.md "From your own machine"): the shell command a call becomes on the login node,
// every value in it quoted by render::shell_quote (as the batch script's values are); ssh's
// argv; ssh started with the spec on its stdin or a page to copy back on its stdout; what a
// failed ssh means for the user. One ssh per command: the spec goes on stdin into a fresh staging
// folder there, removed when the command ends, and a page comes back on stdout, so that no path
// goes through scp's remote-side parsing (legacy scp hands it to a shell).
// Thread safety: the functions are reentrant; a started ssh belongs to its caller.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/process.hpp"

namespace hpctrain::remote {

// Where and how to reach the login node.
struct Target {
  std::string host;                  // ssh's destination: a ~/.ssh/config alias, user@host
  std::string program = "hpctrain";  // the remote hpctrain (--remote-hpctrain)
  std::optional<std::string> dir;    // the remote working directory (--remote-dir); else ssh's
  std::string ssh = "ssh";           // the ssh program (HPCTRAIN_SSH)
};

// One command to run there.
struct Call {
  std::vector<std::string> args;  // hpctrain's arguments: the subcommand, its options
  // The spec, sent on ssh's stdin, is written to this relative path below a fresh staging folder
  // and the command runs in that folder, so that messages name the spec as the user gave it.
  std::optional<std::string> staged_spec;
  // With a staged spec: "--paths-relative-to" the remote working directory (that the staging
  // folder replaced) goes first among the options.
  bool relative_to_cwd = true;
  // A remote file whose bytes come back on ssh's stdout once the command succeeded (report's
  // page); the command's own stdout goes to stderr then.
  std::optional<std::string> fetch;
};

// The script the remote login shell (a POSIX shell: sh, bash, zsh, ksh) runs for `call`.
std::string remote_script(const Target& target, const Call& call);
// ssh's argv: no tty, a connect timeout and keep-alives (a dead link ends `logs -f` within about
// a minute), the host after "--" (never an option), the script as one argument; everything else
// from the user's ~/.ssh/config (keys, ports, ControlMaster).
std::vector<std::string> ssh_argv(const Target& target, const Call& call);

// Starts ssh for `call`: stdin from `stdin_from` (the spec file, a pipe) or /dev/null when -1,
// stdout to `stdout_to` or this process's when -1, stderr this process's.
common::Process start(const Target& target, const Call& call, int stdin_from = -1,
                      int stdout_to = -1);

// ssh's exit status 255: ssh itself failed (host unknown or unreachable, login refused, the
// connection lost); the remote shell's 127 and 126: the remote hpctrain was not found or cannot
// be run. What to tell the user then ("hpctrain: ..." naming the host and what to do); nullopt
// for the command's own statuses, which pass through.
std::optional<std::string> explain_status(const Target& target, int status);

// The status hpctrain exits with when ssh itself failed (as ssh's own).
inline constexpr int kExitSshFailed = 255;

}  // namespace hpctrain::remote
