// hpctrain --host LOGIN SUBCOMMAND ...: the subcommand runs on the login node over the user's own
// ssh (launcher/remote), with the arguments it was given here, rebuilt from CLI11's parse: every
// option as --name=value, then "--" and the positional values, so no value can be read as an
// option there. The login host: --host, else HPCTRAIN_HOST, else the site profile's login_host
// on a machine without Slurm (no sbatch on PATH: on the cluster the profile's host is this one).
// What runs here instead: the spec's file is read and sent (check, render, submit), render -o
// and report's page are written here. docs/quickstart.md "From your own machine" is the
// user's side of this.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cli/common.hpp"
#include "common/run_layout.hpp"
#include "common/unique_fd.hpp"
#include "remote/remote.hpp"
#include "spec/document.hpp"
#include "spec/profile.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

// The global options, set by parsing before any subcommand's callback runs.
struct RemoteOptions {
  std::optional<std::string> host, program, dir;
};
RemoteOptions& remote_options() {
  static RemoteOptions options;
  return options;
}

// A command other than `logs -f` ends within this, ssh's login (a password, a second factor)
// included; past it ssh is stopped.
constexpr auto kCommandDeadline = std::chrono::minutes(15);

struct Login {
  std::string host;
  std::string from;  // where it was named: "--host", "HPCTRAIN_HOST", a profile's file
};

Login checked(const std::string& host, const std::string& from) {
  if (!spec::is_login_host(host)) {
    throw Exit(kExitBadInput, "hpctrain: " + from + ": \"" + host +
                                  "\" is not a login host: " + spec::kLoginHostRule);
  }
  return {host, from};
}

bool slurm_here() {
  for (const auto& dir : folders_in(std::getenv("PATH"))) {
    if (::access((dir / "sbatch").c_str(), X_OK) == 0) return true;
  }
  return false;
}

// The profile the command would load, as spec::load chooses it: --profile, job.profile from --set
// or the spec file, else HPCTRAIN_PROFILE. A spec that does not read is left to the command.
std::optional<std::string> profile_name(const CLI::App& cmd) {
  if (const auto* o = cmd.get_option_no_throw("--profile"); o && o->count() > 0) {
    return o->results().back();
  }
  if (const auto* o = cmd.get_option_no_throw("--set")) {
    for (auto it = o->results().rbegin(); it != o->results().rend(); ++it) {
      if (it->rfind("job.profile=", 0) != 0) continue;
      std::string name = it->substr(12);
      if (name.size() >= 2 && name.front() == '"' && name.back() == '"')
        name = name.substr(1, name.size() - 2);
      return name;
    }
  }
  if (const auto* o = cmd.get_option_no_throw("spec"); o && o->count() > 0) {
    try {
      const auto doc = spec::read_document(o->results().back());
      const auto& root = doc.root;
      if (root.is_table() && root.contains("job") && root.at("job").is_table() &&
          root.at("job").contains("profile") && root.at("job").at("profile").is_string()) {
        return root.at("job").at("profile").as_string().str;
      }
    } catch (const spec::SpecError&) {
    }
  }
  if (const char* name = std::getenv("HPCTRAIN_PROFILE"); name && *name) return name;
  return std::nullopt;
}

std::optional<Login> login_host(const CLI::App& cmd) {
  const auto& options = remote_options();
  if (options.host) {
    if (options.host->empty()) return std::nullopt;  // --host '': here
    return checked(*options.host, "--host");
  }
  if (const char* host = std::getenv("HPCTRAIN_HOST"); host && *host) {
    return checked(host, "HPCTRAIN_HOST");
  }
  if (slurm_here()) return std::nullopt;
  const auto name = profile_name(cmd);
  if (!name) return std::nullopt;
  try {
    const auto found = spec::profile_login_host(*name, profile_dirs());
    if (!found) return std::nullopt;
    return Login{found->host, found->file};
  } catch (const spec::SpecError& e) {
    throw Exit(kExitBadInput, e.what());
  }
}

bool is_flag(const CLI::Option& o) { return o.get_expected_max() == 0; }

// The subcommand's arguments as given, for the remote hpctrain: options as --name=value (or -n
// VALUE without a long name), then "--", then the positional values; `spec_as` in place of the
// spec's path, `skipped` (a local file's option) left out.
std::vector<std::string> forwarded_args(const CLI::App& cmd, const std::string& spec_as,
                                        const std::string& skipped) {
  std::vector<std::string> args{cmd.get_name()}, positional;
  const CLI::Option* spec = cmd.get_option_no_throw("spec");
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0 || o == cmd.get_help_ptr()) continue;
    if (!o->nonpositional()) {
      for (const auto& v : o->results()) positional.push_back(o == spec ? spec_as : v);
      continue;
    }
    const auto& longs = o->get_lnames();
    if (!longs.empty() && longs.front() == skipped) continue;
    const std::string name = longs.empty() ? "-" + o->get_snames().front() : "--" + longs.front();
    if (is_flag(*o)) {
      args.push_back(name);
      continue;
    }
    for (const auto& v : o->results()) {
      if (longs.empty()) {
        args.push_back(name);
        args.push_back(v);
      } else {
        args.push_back(name + "=" + v);
      }
    }
  }
  args.emplace_back("--");
  args.insert(args.end(), positional.begin(), positional.end());
  return args;
}

std::string option_value(const CLI::App& cmd, const std::string& name) {
  const auto* o = cmd.get_option_no_throw(name);
  return o && o->count() > 0 ? o->results().back() : std::string();
}

// A file written here from ssh's stdout: a temporary beside it, renamed over it on commit() and
// removed otherwise.
class LocalCopy {
 public:
  explicit LocalCopy(const fs::path& path) : path_(path) {
    const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
    std::string name = (dir / ("." + path.filename().string() + ".XXXXXX")).string();
    fd_.reset(::mkostemp(name.data(), O_CLOEXEC));
    if (!fd_.valid()) {
      throw Exit(kExitFailure,
                 "hpctrain: cannot write " + path.string() + ": " + std::strerror(errno));
    }
    temp_ = name;
  }
  ~LocalCopy() {
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }
  LocalCopy(const LocalCopy&) = delete;
  LocalCopy& operator=(const LocalCopy&) = delete;
  int fd() const { return fd_.get(); }
  void commit() {
    // The page is readable as any file this user writes (mkostemp's is private).
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd_.get(), 0666 & ~mask);
    if (::fsync(fd_.get()) != 0 || ::rename(temp_.c_str(), path_.c_str()) != 0) {
      throw Exit(kExitFailure,
                 "hpctrain: cannot write " + path_.string() + ": " + std::strerror(errno));
    }
    temp_.clear();
  }

 private:
  fs::path path_;
  std::string temp_;
  UniqueFd fd_;
};

// Runs ssh to its end (stopping it past the deadline) and passes its status on.
void run_to_end(const remote::Target& target, const remote::Call& call, int stdin_from = -1,
                int stdout_to = -1) {
  auto ssh = remote::start(target, call, stdin_from, stdout_to);
  if (!ssh.started()) {
    throw Exit(remote::kExitSshFailed, "hpctrain: cannot run " + target.ssh + ": " + ssh.error() +
                                           " (install OpenSSH's client, or set HPCTRAIN_SSH)");
  }
  auto status = ssh.wait_for(std::chrono::duration_cast<milliseconds>(kCommandDeadline));
  if (!status) {
    ssh.signal(SIGTERM);
    if (!ssh.wait_for(milliseconds(5000))) ssh.signal(SIGKILL);
    ssh.wait();
    throw Exit(kExitFailure, "hpctrain: the command on " + target.host +
                                 " did not end within 15 minutes; stopped ssh");
  }
  if (const auto why = remote::explain_status(target, *status)) throw Exit(*status, *why);
  if (*status != 0) throw Exit(*status, "");
}

}  // namespace

namespace {

// Where the spec's copy goes below the staging folder: the path as given when it is relative and
// stays below (messages then name it as they would here), else its file name.
std::string staged_name(const std::string& spec_file) {
  const fs::path path(spec_file);
  bool below = path.is_relative();
  for (const auto& part : path) below = below && part != "..";
  return below ? spec_file : path.filename().string();
}

void run_spec(const CLI::App& cmd, const remote::Target& target, Remote what) {
  const std::string spec_file = option_value(cmd, "spec");
  // Problems of the file itself (missing, too large, not TOML) are said here, before ssh.
  try {
    spec::read_document(spec_file);
  } catch (const spec::SpecError& e) {
    throw Exit(kExitBadInput, e.what());
  }
  const UniqueFd spec_fd(::open(spec_file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!spec_fd.valid()) {
    throw Exit(kExitBadInput, spec_file + ": cannot open: " + std::strerror(errno));
  }
  remote::Call call;
  call.staged_spec = staged_name(spec_file);
  call.relative_to_cwd = option_value(cmd, "--paths-relative-to").empty();
  const std::string output = what == Remote::kRender ? option_value(cmd, "--output") : "";
  call.args = forwarded_args(cmd, *call.staged_spec, what == Remote::kRender ? "output" : "");
  if (output.empty()) {
    run_to_end(target, call, spec_fd.get());
    return;
  }
  LocalCopy script(output);
  run_to_end(target, call, spec_fd.get(), script.fd());
  script.commit();
}

// report's page, without -o: RUN-report.html in the current directory, RUN the run directory's
// name.
fs::path default_page(const std::string& run_dir) {
  const std::string name =
      fs::path(run_dir + "/").lexically_normal().parent_path().filename().string();
  if (name.empty() || name == "." || name == "..") return "report.html";
  return name + "-report.html";
}

void run_report(const CLI::App& cmd, const remote::Target& target) {
  const std::string run_dir = option_value(cmd, "run_dir");
  std::string output = option_value(cmd, "--output");
  if (output.empty()) output = default_page(run_dir).string();
  // The page is written where it would be on the login node, and copied here.
  const std::string remote_page = run_dir + "/" + layout::kReport;
  remote::Call call;
  call.args = forwarded_args(cmd, "", "output");
  call.args.insert(call.args.begin() + 1, "--output=" + remote_page);
  call.fetch = remote_page;
  LocalCopy page(output);
  run_to_end(target, call, -1, page.fd());
  page.commit();
  std::cout << output << '\n';
}

// logs -f: Ctrl-C here closes ssh's stdin; the remote follow (--end-on-stdin-eof) stops as on
// Ctrl-C there and ssh ends with it; ssh is stopped when it has not ended 10 s later. Ctrl-C in a
// terminal also reaches ssh, which ends the connection: the remote stdin ends all the same.
void follow_remotely(const remote::Target& target, const remote::Call& call) {
  using Clock = std::chrono::steady_clock;
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) {
    throw Exit(kExitFailure, std::string("hpctrain: logs: pipe: ") + std::strerror(errno));
  }
  UniqueFd read_end(ends[0]), write_end(ends[1]);
  SigintGuard sigint;
  auto ssh = remote::start(target, call, read_end.get());
  read_end.reset();
  if (!ssh.started()) {
    throw Exit(remote::kExitSshFailed, "hpctrain: cannot run " + target.ssh + ": " + ssh.error());
  }
  // After Ctrl-C: stdin closed, TERM 10 s later, KILL 5 s after that.
  auto next_step = Clock::time_point::max();
  bool terminated = false;
  std::optional<int> status;
  while (!(status = ssh.wait_for(milliseconds(100)))) {
    if (!sigint_received()) continue;
    if (write_end.valid()) {
      write_end.reset();
      next_step = Clock::now() + std::chrono::seconds(10);
    } else if (Clock::now() >= next_step) {
      ssh.signal(terminated ? SIGKILL : SIGTERM);
      terminated = true;
      next_step = Clock::now() + std::chrono::seconds(5);
    }
  }
  if (sigint_received()) {
    if (*status != 0) std::cerr << "hpctrain: logs: interrupted\n";
    return;
  }
  if (const auto why = remote::explain_status(target, *status)) throw Exit(*status, *why);
  if (*status != 0) throw Exit(*status, "");
}

void run_logs(const CLI::App& cmd, const remote::Target& target) {
  remote::Call call;
  call.args = forwarded_args(cmd, "", "");
  if (cmd.get_option("--follow")->count() == 0) {
    run_to_end(target, call);
    return;
  }
  call.args.insert(call.args.begin() + 1, "--end-on-stdin-eof");
  follow_remotely(target, call);
}

remote::Target target_of(const Login& login) {
  remote::Target target;
  target.host = login.host;
  const auto& options = remote_options();
  if (options.program) {
    if (options.program->empty()) {
      throw Exit(kExitBadInput, "hpctrain: --remote-hpctrain: empty; name the program");
    }
    target.program = *options.program;
  }
  target.dir = options.dir;
  if (const char* ssh = std::getenv("HPCTRAIN_SSH"); ssh && *ssh) target.ssh = ssh;
  return target;
}

}  // namespace

void add_remote_options(CLI::App& app) {
  auto& options = remote_options();
  app.add_option("--host", options.host,
                 "Run check, render, submit, status, list, logs, cancel and report on this login "
                 "node over ssh (a ~/.ssh/config Host alias, user@host); default: "
                 "$HPCTRAIN_HOST, else the site profile's login_host where there is no Slurm; '' "
                 "runs here");
  app.add_option("--remote-hpctrain", options.program,
                 "The hpctrain to run on the login node (default: hpctrain on the PATH of a "
                 "non-interactive ssh session there)");
  app.add_option("--remote-dir", options.dir,
                 "Working directory on the login node: relative run directories and the spec's "
                 "relative paths start there (default: ssh's, your home directory)");
  // `hpctrain submit --host H spec.toml` works as `hpctrain --host H submit spec.toml`.
  app.fallthrough();
}

bool run_remotely(const CLI::App& cmd, Remote what) {
  const auto login = login_host(cmd);
  if (!login) return false;
  const remote::Target target = target_of(*login);
  switch (what) {
    case Remote::kSpec:
    case Remote::kRender:
      run_spec(cmd, target, what);
      break;
    case Remote::kReport:
      run_report(cmd, target);
      break;
    case Remote::kLogs:
      run_logs(cmd, target);
      break;
    case Remote::kRunDir: {
      remote::Call call;
      call.args = forwarded_args(cmd, "", "");
      run_to_end(target, call);
      break;
    }
  }
  return true;
}

void refuse_remotely(const CLI::App& cmd) {
  if (const auto login = login_host(cmd)) {
    throw Exit(kExitBadInput, "hpctrain " + cmd.get_name() + " runs on the login node itself, " +
                                  "not over ssh (a login host is set by " + login->from +
                                  "): run it there (ssh " + login->host + "), or --host '' here");
  }
}

}  // namespace hpctrain::cli
