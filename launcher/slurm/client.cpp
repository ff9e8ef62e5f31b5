#include "slurm/client.hpp"

#include <regex>
#include <sstream>

#include "slurm/process.hpp"

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

namespace {

std::string first_line(const std::string& s) {
  auto end = s.find('\n');
  return s.substr(0, end);
}

class CommandClient : public SlurmClient {
 public:
  explicit CommandClient(CommandClientOptions options) : options_(options) {}

  std::string submit(const std::filesystem::path& script) override {
    const auto r = run({"sbatch", "--parsable", script.string()});
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
    }
    // sacct knows older jobs where accounting is on.
    r = run({"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + job_id,
             "--format=JobID,State,ExitCode,NodeList"});
    if (r.exit_status == 0) return parse_state_lines(r.out, "sacct");
    return {};
  }

  void cancel(const std::string& job_id) override {
    const auto r = run({"scancel", job_id});
    if (r.exit_status != 0) {
      throw SlurmError("scancel " + job_id +
                       " failed: " + first_line(r.err.empty() ? r.out : r.err));
    }
  }

 private:
  CommandResult run(const std::vector<std::string>& argv) {
    auto r = run_command(argv, options_.timeout);
    if (r.not_found) throw SlurmError(r.err + " (is Slurm installed and on PATH?)");
    if (r.timed_out) {
      throw SlurmError(argv[0] + " did not answer within " +
                       std::to_string(options_.timeout.count() / 1000) +
                       " s (is slurmctld up? SLURM_CONF=" +
                       (std::getenv("SLURM_CONF") ? std::getenv("SLURM_CONF") : "default") + ")");
    }
    return r;
  }

  CommandClientOptions options_;
};

}  // namespace

std::unique_ptr<SlurmClient> make_command_client(CommandClientOptions options) {
  return std::make_unique<CommandClient>(options);
}

}  // namespace hpctrain::slurm
