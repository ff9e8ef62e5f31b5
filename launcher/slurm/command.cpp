#include "slurm/command.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace hpctrain::slurm {
namespace {

std::string last_line(const std::string& s) {
  size_t end = s.size();
  while (end > 0 && (s[end - 1] == '\n' || s[end - 1] == ' ')) --end;
  const size_t start = s.rfind('\n', end == 0 ? 0 : end - 1);
  return s.substr(start == std::string::npos ? 0 : start + 1,
                  end - (start == std::string::npos ? 0 : start + 1));
}

std::string slurm_conf_words() {
  const char* conf = std::getenv("SLURM_CONF");
  return conf ? std::string("SLURM_CONF is ") + conf
              : std::string(
                    "SLURM_CONF is not set, so Slurm reads /etc/slurm/slurm.conf or, without "
                    "one, looks for a controller in DNS");
}

[[noreturn]] void throw_unreachable(const std::string& command, const std::string& said) {
  throw SlurmUnreachable("no Slurm controller was reachable (" + command + " said: " + said +
                         "). Check with 'scontrol ping'; " + slurm_conf_words() + ".");
}

// Slurm retries a missing configuration file for a minute before it gives up.
void check_slurm_conf() {
  if (const char* conf = std::getenv("SLURM_CONF"); conf && !std::filesystem::exists(conf)) {
    throw SlurmUnreachable(std::string("no Slurm controller was reachable: SLURM_CONF names ") +
                           conf +
                           ", which does not exist. Check with 'scontrol ping' once "
                           "SLURM_CONF names the cluster's slurm.conf (or is unset).");
  }
}

const std::string& what_said(const common::CommandResult& r) {
  return r.err.empty() ? r.out : r.err;
}

}  // namespace

bool is_unreachable_message(const std::string& text) {
  for (const char* sign :
       {"Unable to contact slurm controller", "Could not establish a configuration source",
        "resolve_ctls_from_dns_srv", "Unable to process configuration file",
        "Socket timed out on send/recv", "Connection refused"}) {
    if (text.find(sign) != std::string::npos) return true;
  }
  return false;
}

void throw_if_unreachable(const std::string& command, const common::CommandResult& r) {
  if (r.exit_status != 0 && is_unreachable_message(r.err))
    throw_unreachable(command, last_line(r.err));
}

common::CommandResult run_slurm_command(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout) {
  check_slurm_conf();
  auto r = common::run_command(argv, timeout);
  if (r.not_found) throw SlurmError(r.err + " (is Slurm installed and on PATH?)");
  if (r.timed_out) {
    throw SlurmUnreachable("no Slurm controller was reachable: " + argv[0] +
                           " did not answer within " + std::to_string(timeout.count() / 1000) +
                           " s. Check with 'scontrol ping'; " + slurm_conf_words() + ".");
  }
  return r;
}

void start_slurm_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  check_slurm_conf();
  const auto seconds = std::max<long long>(1, timeout.count() / 1000);
  std::vector<std::string> bounded = {"timeout", std::to_string(seconds)};
  bounded.insert(bounded.end(), argv.begin(), argv.end());
  common::Process(bounded).detach();
}

std::string said(const common::CommandResult& r) {
  std::string s = what_said(r);
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t\n") + 1);
  return s;
}

std::string first_line_said(const common::CommandResult& r) {
  const std::string& s = what_said(r);
  return s.substr(0, s.find('\n'));
}

std::vector<std::string> output_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace hpctrain::slurm
