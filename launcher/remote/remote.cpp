#include "remote/remote.hpp"

#include "render/render.hpp"

namespace hpctrain::remote {
namespace {

using render::shell_quote;

// The parts of the script that are ours: variables and operators, never a user's value. Every
// user's value goes through shell_quote.
constexpr const char* kStageVar = "\"$hpctrain_stage\"";

// The staging folder: mktemp's own, under the login node's TMPDIR; the spec's copy written in it
// from stdin; removed again when the copy fails.
std::string stage_spec(const std::string& staged) {
  std::string s =
      "hpctrain_cwd=$PWD\n"
      "hpctrain_stage=$(mktemp -d \"${TMPDIR:-/tmp}/hpctrain-spec.XXXXXXXX\") || exit 1\n{ ";
  const auto slash = staged.rfind('/');
  if (slash != std::string::npos) {
    s += std::string("mkdir -p -- ") + kStageVar + "/" + shell_quote(staged.substr(0, slash)) +
         " && ";
  }
  s += std::string("cat > ") + kStageVar + "/" + shell_quote(staged) + " && cd " + kStageVar +
       "; } || { rm -rf -- " + kStageVar + "; exit 1; }\n";
  return s;
}

// The hpctrain command: with a staged spec, the subcommand first, then where the spec's relative
// paths start (the working directory the staging folder replaced), then the rest.
std::string hpctrain_command(const Target& target, const Call& call) {
  std::string s = shell_quote(target.program);
  for (size_t i = 0; i < call.args.size(); ++i) {
    s += ' ' + shell_quote(call.args[i]);
    if (i == 0 && call.staged_spec && call.relative_to_cwd)
      s += " --paths-relative-to=\"$hpctrain_cwd\"";
  }
  if (call.fetch) s += " 1>&2 && cat -- " + shell_quote(*call.fetch);
  return s;
}

}  // namespace

std::string remote_script(const Target& target, const Call& call) {
  // A login shell that sets HPCTRAIN_HOST (a ~/.bashrc shared with a laptop) must not send the
  // command on again.
  std::string s = "unset HPCTRAIN_HOST\n";
  if (target.dir) s += "cd -- " + shell_quote(*target.dir) + " || exit 2\n";
  if (!call.staged_spec) return s + hpctrain_command(target, call) + "\n";
  s += stage_spec(*call.staged_spec);
  s += hpctrain_command(target, call) + "\n";
  s += std::string("hpctrain_status=$?\ncd / && rm -rf -- ") + kStageVar +
       "\nexit $hpctrain_status\n";
  return s;
}

std::vector<std::string> ssh_argv(const Target& target, const Call& call) {
  return {target.ssh,
          "-T",
          "-o",
          "ConnectTimeout=30",
          "-o",
          "ServerAliveInterval=15",
          "-o",
          "ServerAliveCountMax=4",
          "--",
          target.host,
          remote_script(target, call)};
}

common::Process start(const Target& target, const Call& call, int stdin_from, int stdout_to) {
  common::ProcessOptions options;
  options.in = common::Stdio::kNull;
  options.stdin_from = stdin_from;
  options.stdout_to = stdout_to;
  return common::Process(ssh_argv(target, call), options);
}

std::optional<std::string> explain_status(const Target& target, int status) {
  const std::string& host = target.host;
  switch (status) {
    case kExitSshFailed:
      return "hpctrain: ssh to " + host +
             " failed (exit status 255; ssh's own message is above): check that `ssh " + host +
             " true` works (the host name or ~/.ssh/config Host alias, its port, your key or "
             "agent)";
    case 127:
      return "hpctrain: " + target.program + " was not found on " + host +
             " (exit status 127): it must be on the PATH of a non-interactive ssh session there "
             "(load its module in the remote ~/.bashrc, say), or named with --remote-hpctrain "
             "PATH";
    case 126:
      return "hpctrain: " + target.program + " on " + host +
             " cannot be run (exit status 126: not an executable program?); name hpctrain with "
             "--remote-hpctrain PATH";
    default:
      return std::nullopt;
  }
}

}  // namespace hpctrain::remote
