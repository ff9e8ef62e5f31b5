#include "slurm/client.hpp"

#include <ctime>
#include <regex>
#include <sstream>
#include <stdexcept>

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
    if (parts.size() > 4) s.start = parts[4];
    s.source = source;
    out.push_back(s);
  }
  return out;
}

std::optional<double> parse_slurm_time(const std::string& text) {
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || *end != '\0') return std::nullopt;
  tm.tm_isdst = -1;  // local time, with the zone's daylight saving rule for that date
  const std::time_t t = std::mktime(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<double>(t);
}

std::string state_of(const std::vector<JobState>& states, const std::string& job_id) {
  for (const auto& s : states) {
    if (s.job_id == job_id) return s.state;
  }
  return states.empty() ? std::string() : states.front().state;
}

bool is_terminal_state(const std::string& state) {
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                        "BOOT_FAIL", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED"}) {
    if (state == s) return true;
  }
  return false;
}

namespace {

using std::chrono::milliseconds;

std::string joined(const std::vector<std::string>& ids) {
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  return list;
}

// "COMMAND failed (status N): what it said first".
[[noreturn]] void throw_failed(const std::string& command, const common::CommandResult& r) {
  throw SlurmError(command + " failed (status " + std::to_string(r.exit_status) +
                   "): " + first_line_said(r));
}

std::vector<std::string> sbatch_argv(const std::filesystem::path& script,
                                     const SubmitOptions& options) {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  if (!options.after.empty()) argv.push_back("--dependency=afterany:" + options.after);
  if (!options.export_env.empty()) {
    std::string exports = "--export=ALL";
    for (const auto& var : options.export_env) {
      if (var.find(',') != std::string::npos) {
        throw std::invalid_argument("sbatch --export cannot pass a comma: " + var);
      }
      exports += "," + var;
    }
    argv.push_back(exports);
  }
  if (!options.exclude.empty()) argv.push_back("--exclude=" + options.exclude);
  argv.push_back(script.string());
  return argv;
}

class CommandClient : public SlurmClient {
 public:
  explicit CommandClient(CommandClientOptions options) : options_(options) {}

  std::string submit(const std::filesystem::path& script, const SubmitOptions& options) override {
    const auto r = change(sbatch_argv(script, options));
    throw_if_unreachable("sbatch", r);
    if (r.exit_status != 0) throw_failed("sbatch", r);
    auto id = parse_job_id(r.out);
    if (!id)
      throw SlurmError("sbatch printed no job id: '" + r.out.substr(0, r.out.find('\n')) + "'");
    return *id;
  }

  std::vector<JobState> query(const std::string& job_id) override {
    // squeue knows jobs still in the controller's memory, finished ones included (MinJobAge).
    auto r = ask({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job_id,
                  "--format=%i|%T|%r|%N|%S"});
    throw_if_unreachable("squeue", r);
    if (r.exit_status == 0) {
      auto states = parse_state_lines(r.out, "squeue");
      if (!states.empty()) return states;
    }
    // sacct knows older jobs where accounting is on.
    r = ask({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + job_id,
             "--format=JobID,State,ExitCode,NodeList,Start"});
    if (r.exit_status == 0) return parse_state_lines(r.out, "sacct");
    return {};
  }

  std::vector<JobState> query_all(const std::vector<std::string>& job_ids) override;

  void cancel(const std::string& job_id) override {
    const auto r = change({"scancel", job_id});
    throw_if_unreachable("scancel", r);
    if (r.exit_status != 0) {
      throw SlurmError("scancel " + job_id + " failed: " + first_line_said(r));
    }
  }

  void requeue(const std::string& job_id) override {
    // The requeue signals every process of the job with TERM, this scontrol too when it has not
    // exited by then (a loaded controller): scontrol runs with TERM ignored (a disposition exec
    // keeps), so that it still says whether the requeue was done; the supervisor's exclusion of
    // lost nodes and its chain depend on that answer. The timeout's KILL still ends it.
    const auto r =
        change({"sh", "-c", "trap '' TERM; exec \"$@\"", "sh", "scontrol", "requeue", job_id});
    throw_if_unreachable("scontrol", r);
    // Ended by another signal (KILL): it may well have been carried out, and is no refusal.
    if (r.exit_status > 128) {
      throw SlurmUnreachable("scontrol requeue " + job_id + " was ended by signal " +
                             std::to_string(r.exit_status - 128) + " before it answered");
    }
    if (r.exit_status != 0) {
      const auto words = said(r);
      throw SlurmError("scontrol requeue " + job_id + " was refused" +
                       (words.empty() ? std::string() : " (scontrol: " + words + ")"));
    }
  }

  void exclude_nodes(const std::string& job_id, const std::string& nodelist) override {
    const std::vector<std::string> argv = {"scontrol", "update", "JobId=" + job_id,
                                           "ExcNodeList=" + nodelist};
    const auto r = change(argv);
    throw_if_unreachable("scontrol", r);
    if (r.exit_status != 0) throw_failed("scontrol update", r);
  }

  void signal(const std::string& job_id, const std::string& signal) override {
    const auto r = change({"scancel", "--signal=" + signal, job_id});
    throw_if_unreachable("scancel", r);
    if (r.exit_status != 0) {
      throw SlurmError("scancel --signal=" + signal + " " + job_id +
                       " failed: " + first_line_said(r));
    }
  }

  std::optional<bool> requeue_allowed(const std::string& job_id) override {
    const auto r = ask({"scontrol", "show", "job", "--oneliner", job_id});
    throw_if_unreachable("scontrol", r);
    if (r.exit_status != 0) throw_failed("scontrol show job", r);
    static const std::regex kRequeue("(^|\\s)Requeue=([01])(\\s|$)");
    std::smatch m;
    if (!std::regex_search(r.out, m, kRequeue)) return std::nullopt;
    return m[2] == "1";
  }

  common::CommandResult run_in_job(const std::string& job_id, const std::string& node,
                                   const std::vector<std::string>& argv) override {
    std::vector<std::string> full = {"srun",       "--jobid=" + job_id,  "--overlap", "--nodes=1",
                                     "--ntasks=1", "--nodelist=" + node, "--quiet"};
    full.insert(full.end(), argv.begin(), argv.end());
    const auto r = change(full);
    throw_if_unreachable("srun", r);
    return r;
  }

  std::vector<std::string> step_ids(const std::string& job_id) override {
    const auto r = ask({"squeue", "--noheader", "--steps", "--jobs=" + job_id, "--format=%i"});
    throw_if_unreachable("squeue", r);
    if (r.exit_status != 0) throw_failed("squeue --steps", r);
    static const std::regex kStep("[0-9_]+\\.[0-9]+");
    std::vector<std::string> out;
    for (auto id : output_lines(r.out)) {
      id.erase(0, id.find_first_not_of(" \t"));
      id.erase(id.find_last_not_of(" \t") + 1);
      if (std::regex_match(id, kStep)) out.push_back(id);
    }
    return out;
  }

  void kill_step(const std::string& step_id) override {
    try {
      start_slurm_command({"scancel", "--signal=KILL", step_id}, change_timeout());
    } catch (const SlurmError&) {
      // No configuration to reach a controller with: the step ends with its srun.
    }
  }

  std::vector<std::string> hostnames(const std::string& nodelist) override {
    const auto r = ask({"scontrol", "show", "hostnames", nodelist});
    throw_if_unreachable("scontrol", r);
    if (r.exit_status != 0) throw_failed("scontrol show hostnames", r);
    return output_lines(r.out);
  }

  std::optional<int> slurmd_port() override;
  std::vector<PartitionInfo> partitions() override;
  Accounting accounting(const std::string& user) override;

 private:
  milliseconds change_timeout() const { return options_.timeout; }
  milliseconds query_timeout() const { return options_.query_timeout.value_or(options_.timeout); }
  // A command that changes something (sbatch, scancel, scontrol requeue and update).
  common::CommandResult change(const std::vector<std::string>& argv) {
    return run_slurm_command(argv, change_timeout());
  }
  // A query.
  common::CommandResult ask(const std::vector<std::string>& argv) {
    return run_slurm_command(argv, query_timeout());
  }

  CommandClientOptions options_;
};

std::vector<JobState> CommandClient::query_all(const std::vector<std::string>& job_ids) {
  if (job_ids.empty()) return {};
  // squeue answers for the jobs it knows and is silent on the others, unless it knows none of
  // them ("Invalid job id specified").
  auto r = ask({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + joined(job_ids),
                "--format=%i|%T|%r|%N|%S"});
  throw_if_unreachable("squeue", r);
  if (r.exit_status != 0 && r.err.find("Invalid job id") == std::string::npos) {
    throw_failed("squeue", r);
  }
  std::vector<JobState> states =
      r.exit_status == 0 ? parse_state_lines(r.out, "squeue") : std::vector<JobState>{};
  // The jobs squeue has forgotten (MinJobAge): sacct, where accounting is on.
  std::vector<std::string> missing;
  for (const auto& id : job_ids) {
    bool known = false;
    for (const auto& s : states) {
      if (s.job_id == id || s.job_id.rfind(id + "_", 0) == 0) known = true;
    }
    if (!known) missing.push_back(id);
  }
  if (!missing.empty()) {
    r = ask({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + joined(missing),
             "--format=JobID,State,ExitCode,NodeList,Start"});
    if (r.exit_status == 0) {
      for (auto& s : parse_state_lines(r.out, "sacct")) states.push_back(std::move(s));
    }
  }
  return states;
}

std::optional<int> CommandClient::slurmd_port() {
  const auto r = ask({"scontrol", "show", "config"});
  throw_if_unreachable("scontrol", r);
  if (r.exit_status != 0) throw_failed("scontrol show config", r);
  for (const auto& line : output_lines(r.out)) {
    std::istringstream words(line);
    std::string key, eq, value;
    words >> key >> eq >> value;
    if (key != "SlurmdPort") continue;
    if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos ||
        value.size() > 5) {
      return std::nullopt;
    }
    return std::stoi(value);
  }
  return std::nullopt;
}

std::vector<PartitionInfo> CommandClient::partitions() {
  const auto r = ask({"sinfo", "--noheader", "--all", std::string("--format=") + kSinfoFormat});
  throw_if_unreachable("sinfo", r);
  if (r.exit_status != 0) throw_failed("sinfo", r);
  return parse_sinfo_partitions(r.out);
}

Accounting CommandClient::accounting(const std::string& user) {
  Accounting a;
  a.user = user;
  auto answer = [&](const std::vector<std::string>& argv, std::string& out) {
    try {
      const auto r = ask(argv);
      if (r.exit_status == 0) {
        out = r.out;
        return true;
      }
      a.not_checked = "sacctmgr said: " + first_line_said(r);
    } catch (const SlurmUnreachable&) {
      // A missing SLURM_CONF too: sacctmgr would retry it until the deadline.
      a.not_checked =
          "sacctmgr did not answer within " + std::to_string(query_timeout().count() / 1000) + " s";
    } catch (const SlurmError&) {
      a.not_checked = "sacctmgr was not found";
    }
    return false;
  };
  std::string assoc, qos;
  if (!answer({"sacctmgr", "--noheader", "--parsable2", "show", "associations", "where",
               "user=" + user, "format=Account,Partition,QOS"},
              assoc) ||
      !answer({"sacctmgr", "--noheader", "--parsable2", "show", "qos", "format=Name"}, qos)) {
    return a;
  }
  a.associations = parse_associations(assoc);
  a.qos_names = parse_qos_names(qos);
  return a;
}

}  // namespace

std::unique_ptr<SlurmClient> make_command_client(CommandClientOptions options) {
  return std::make_unique<CommandClient>(options);
}

}  // namespace hpctrain::slurm
