#include "slurm/client.hpp"

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "common/process.hpp"

namespace hpctrain::slurm {

std::optional<std::string> parse_job_id(const std::string& text) {
  static const std::regex kId("\\s*([0-9]{1,18}(?:_[0-9]{1,9})?)(?:;[A-Za-z0-9._-]+)?\\s*");
  std::smatch m;
  if (!std::regex_match(text, m, kId)) return std::nullopt;
  return m[1].str();
}

std::vector<JobState> parse_state_lines(const std::string& text, const std::string& source) {
  std::vector<JobState> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> parts;
    std::string part;
    std::istringstream fields(line);
    while (std::getline(fields, part, '|')) parts.push_back(part);
    if (parts.size() < 2) continue;
    JobState s;
    s.job_id = parts[0];
    s.state = parts[1];
    // sacct writes "CANCELLED by 0"; keep the state word.
    if (auto sp = s.state.find(' '); sp != std::string::npos) s.state = s.state.substr(0, sp);
    if (parts.size() > 2) s.reason = parts[2];
    if (parts.size() > 3) s.nodes = parts[3];
    s.source = source;
    out.push_back(s);
  }
  return out;
}

bool is_unreachable_message(const std::string& text) {
  for (const char* sign :
       {"Unable to contact slurm controller", "Could not establish a configuration source",
        "resolve_ctls_from_dns_srv", "Unable to process configuration file",
        "Socket timed out on send/recv", "Connection refused"}) {
    if (text.find(sign) != std::string::npos) return true;
  }
  return false;
}

bool is_terminal_state(const std::string& state) {
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                        "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}) {
    if (state == s) return true;
  }
  return false;
}

namespace {

std::string first_line(const std::string& s) {
  auto end = s.find('\n');
  return s.substr(0, end);
}

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

class CommandClient : public SlurmClient {
 public:
  explicit CommandClient(CommandClientOptions options) : options_(options) {}

  std::string submit(const std::filesystem::path& script) override {
    const auto r = run({"sbatch", "--parsable", script.string()});
    throw_if_unreachable("sbatch", r);
    if (r.exit_status != 0) {
      throw SlurmError("sbatch failed (status " + std::to_string(r.exit_status) +
                       "): " + first_line(r.err.empty() ? r.out : r.err));
    }
    auto id = parse_job_id(r.out);
    if (!id) throw SlurmError("sbatch printed no job id: '" + first_line(r.out) + "'");
    return *id;
  }

  std::vector<JobState> query(const std::string& job_id) override {
    // squeue knows jobs still in the controller's memory, finished ones included (MinJobAge).
    auto r = run({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job_id,
                  "--format=%i|%T|%r|%N"});
    if (r.exit_status == 0) {
      auto states = parse_state_lines(r.out, "squeue");
      if (!states.empty()) return states;
    } else if (is_unreachable_message(r.err)) {
      throw_unreachable("squeue", last_line(r.err));
    }
    // sacct knows older jobs where accounting is on.
    r = run({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + job_id,
             "--format=JobID,State,ExitCode,NodeList"});
    if (r.exit_status == 0) return parse_state_lines(r.out, "sacct");
    return {};
  }

  void cancel(const std::string& job_id) override {
    const auto r = run({"scancel", job_id});
    throw_if_unreachable("scancel", r);
    if (r.exit_status != 0) {
      throw SlurmError("scancel " + job_id +
                       " failed: " + first_line(r.err.empty() ? r.out : r.err));
    }
  }

  std::vector<JobState> query_all(const std::vector<std::string>& job_ids) override {
    if (job_ids.empty()) return {};
    std::string list;
    for (const auto& id : job_ids) list += (list.empty() ? "" : ",") + id;
    // squeue answers for the jobs it knows and is silent on the others, unless it knows none of
    // them ("Invalid job id specified").
    auto r = run({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + list,
                  "--format=%i|%T|%r|%N"});
    throw_if_unreachable("squeue", r);
    if (r.exit_status != 0 && r.err.find("Invalid job id") == std::string::npos) {
      throw SlurmError("squeue failed (status " + std::to_string(r.exit_status) +
                       "): " + first_line(r.err.empty() ? r.out : r.err));
    }
    std::vector<JobState> states =
        r.exit_status == 0 ? parse_state_lines(r.out, "squeue") : std::vector<JobState>{};
    // The jobs squeue has forgotten (MinJobAge): sacct, where accounting is on.
    std::string missing;
    for (const auto& id : job_ids) {
      bool known = false;
      for (const auto& s : states) {
        if (s.job_id == id || s.job_id.rfind(id + "_", 0) == 0) known = true;
      }
      if (!known) missing += (missing.empty() ? "" : ",") + id;
    }
    if (!missing.empty()) {
      r = run({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + missing,
               "--format=JobID,State,ExitCode,NodeList"});
      if (r.exit_status == 0) {
        for (auto& s : parse_state_lines(r.out, "sacct")) states.push_back(std::move(s));
      }
    }
    return states;
  }

 private:
  common::CommandResult run(const std::vector<std::string>& argv) {
    return run_slurm_command(argv, options_.timeout);
  }

  CommandClientOptions options_;
};

}  // namespace

void throw_if_unreachable(const std::string& command, const common::CommandResult& r) {
  if (r.exit_status != 0 && is_unreachable_message(r.err))
    throw_unreachable(command, last_line(r.err));
}

common::CommandResult run_slurm_command(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout) {
  // Slurm retries a missing configuration file for a minute before it gives up.
  if (const char* conf = std::getenv("SLURM_CONF"); conf && !std::filesystem::exists(conf)) {
    throw SlurmUnreachable(std::string("no Slurm controller was reachable: SLURM_CONF names ") +
                           conf +
                           ", which does not exist. Check with 'scontrol ping' once "
                           "SLURM_CONF names the cluster's slurm.conf (or is unset).");
  }
  auto r = common::run_command(argv, timeout);
  if (r.not_found) throw SlurmError(r.err + " (is Slurm installed and on PATH?)");
  if (r.timed_out) {
    throw SlurmUnreachable("no Slurm controller was reachable: " + argv[0] +
                           " did not answer within " + std::to_string(timeout.count() / 1000) +
                           " s. Check with 'scontrol ping'; " + slurm_conf_words() + ".");
  }
  return r;
}

std::unique_ptr<SlurmClient> make_command_client(CommandClientOptions options) {
  return std::make_unique<CommandClient>(options);
}

}  // namespace hpctrain::slurm
