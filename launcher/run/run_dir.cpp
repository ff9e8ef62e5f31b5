#include "run/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/durable_file.hpp"
#include "common/run_layout.hpp"
#include "common/unique_fd.hpp"

namespace hpctrain::run {
namespace {

[[noreturn]] void fail_errno(const std::string& what, const fs::path& path) {
  throw RunDirError(what + " " + path.string() + ": " + std::strerror(errno));
}

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An exclusive flock on run_dir/.lock for the lifetime of the object, with a deadline.
class DirLock {
 public:
  explicit DirLock(const fs::path& dir)
      : fd_(::open((dir / layout::kLock).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_.get() < 0) fail_errno("cannot create lock file in", dir);
    for (int i = 0; i < 300; ++i) {
      if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return;
      if (errno != EWOULDBLOCK && errno != EINTR) fail_errno("cannot lock", dir / layout::kLock);
      ::usleep(100 * 1000);
    }
    throw RunDirError("another hpctrain is working in " + dir.string() +
                      " (waited 30 s for its .lock)");
  }

 private:
  UniqueFd fd_;
};

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw RunDirError("cannot create " + dir.string() + ": " + ec.message());
}

// What put_spec found in the directory.
enum class SpecPut { kNew, kSame, kReplacedUnused, kReplacedForced };

// Writes the frozen spec unless an identical one is there; refuses a different one without force
// (or `unused`: the directory was never submitted nor run, so the old spec is simply replaced).
SpecPut put_spec(const fs::path& dir, const std::string& frozen, bool force, bool unused) {
  const fs::path path = dir / layout::kSpec;
  const auto existing = read_file(path);
  if (existing && *existing == frozen) return SpecPut::kSame;
  if (existing && unused) {
    write_file_atomic(path, frozen);
    return SpecPut::kReplacedUnused;
  }
  if (existing) {
    if (!force) {
      throw RunDirError(path.string() +
                        " holds a different spec: this run directory belongs to another "
                        "configuration. Use a new job.run_dir, or --force to replace it (the old "
                        "spec is kept beside it; its checkpoints may not fit the new spec)");
    }
    for (int n = 1;; ++n) {
      const fs::path keep = dir / layout::replaced_spec_name(n);
      if (!fs::exists(keep)) {
        write_file_atomic(keep, *existing);
        break;
      }
    }
  }
  write_file_atomic(path, frozen);
  return existing ? SpecPut::kReplacedForced : SpecPut::kNew;
}

// Nothing was ever submitted from or run in this directory (or its array task folders).
bool never_used(const fs::path& run_dir, const std::vector<fs::path>& dirs) {
  if (last_submission(run_dir)) return false;
  for (const auto& d : dirs) {
    for (const char* name : {layout::kSubmissions, layout::kAttempts, layout::kMetrics,
                             layout::kCheckpoints, layout::kWeights}) {
      if (fs::exists(d / name)) return false;
    }
  }
  return true;
}

}  // namespace

// The durable writes are common/durable_file.hpp's; here their errors are the run directory's.
void write_file_atomic(const fs::path& path, const std::string& content) {
  try {
    common::write_file_atomic(path, content);
  } catch (const common::FileError& e) {
    throw RunDirError(e.what());
  }
}

void append_line(const fs::path& path, const std::string& line) {
  try {
    common::append_line(path, line);
  } catch (const common::FileError& e) {
    throw RunDirError(e.what());
  }
}

void require_run_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || !fs::exists(dir / layout::kSpec, ec)) {
    throw RunDirError(dir.string() + " is not a run directory (no " + layout::kSpec +
                      "); see hpctrain submit");
  }
}

spec::Spec read_frozen_spec(const fs::path& dir) {
  spec::LoadOptions options;
  options.spec_file = dir / layout::kSpec;
  options.check_paths = false;
  try {
    return spec::load(options).spec;
  } catch (const std::exception& e) {
    // A SpecError lists every problem, one a line: the first names the file and says enough.
    std::string what = e.what();
    if (const auto nl = what.find('\n'); nl != std::string::npos && nl + 1 < what.size()) {
      what = what.substr(0, nl);
    }
    throw RunDirError(what);
  }
}

Prepared prepare(const spec::Resolved& resolved, const std::string& script, bool force) {
  const spec::Spec& s = resolved.spec;
  Prepared p;
  p.run_dir = s.job.run_dir;
  p.script = p.run_dir / layout::kScript;
  p.array_tasks = resolved.tasks.size();
  for (fs::path d = p.run_dir; !d.empty() && d != d.parent_path() && !fs::exists(d);
       d = d.parent_path()) {
    p.created = d;
  }
  make_dirs(p.run_dir);
  DirLock lock(p.run_dir);
  make_dirs(p.run_dir / layout::kLogs);
  std::vector<fs::path> dirs = {p.run_dir};
  for (const auto& task : resolved.tasks) dirs.push_back(task.job.run_dir);
  const bool unused = never_used(p.run_dir, dirs);
  auto note = [&p](SpecPut put) {
    p.spec_changed = p.spec_changed || put == SpecPut::kReplacedForced;
    p.unsubmitted_spec_replaced = p.unsubmitted_spec_replaced || put == SpecPut::kReplacedUnused;
  };
  note(put_spec(p.run_dir, spec::freeze(s), force, unused));
  for (const auto& task : resolved.tasks) {
    make_dirs(task.job.run_dir);
    note(put_spec(task.job.run_dir, spec::freeze(task), force, unused));
  }
  write_file_atomic(p.script, script);
  return p;
}

bool discard_unsubmitted(const Prepared& p) {
  if (p.created.empty() || last_submission(p.run_dir)) return false;
  std::error_code ec;
  fs::remove_all(p.run_dir, ec);
  if (ec) throw RunDirError("cannot remove " + p.run_dir.string() + ": " + ec.message());
  // The parents it made, innermost first, only while empty (another submit may be filling one).
  for (fs::path d = p.run_dir.parent_path(); p.created != p.run_dir && !d.empty();
       d = d.parent_path()) {
    if (!fs::remove(d, ec) || ec) break;
    if (d == p.created) break;
  }
  return true;
}

void record_submission(const fs::path& run_dir, const Submission& s) {
  nlohmann::json j = {
      {"job_id", s.job_id}, {"submitted_at", s.submitted_at}, {"array_tasks", s.array_tasks}};
  if (!s.chained_from.empty()) j["chained_from"] = s.chained_from;
  append_line(run_dir / layout::kSubmissions, j.dump());
}

std::optional<Submission> last_submission(const fs::path& run_dir) {
  std::ifstream in(run_dir / layout::kSubmissions);
  std::optional<Submission> last;
  std::string line;
  while (std::getline(in, line)) {
    try {
      const auto j = nlohmann::json::parse(line);
      Submission s;
      s.job_id = j.at("job_id").get<std::string>();
      s.submitted_at = j.value("submitted_at", "");
      s.array_tasks = j.value("array_tasks", size_t{0});
      s.chained_from = j.value("chained_from", "");
      last = s;
    } catch (const std::exception&) {
      // A torn last line (crash mid-append) leaves the previous record in force.
    }
  }
  return last;
}

std::vector<Attempt> read_attempts(const fs::path& dir, size_t* malformed) {
  std::vector<Attempt> out;
  std::ifstream in(dir / layout::kAttempts);
  std::string line;
  size_t bad = 0;
  while (std::getline(in, line)) {
    try {
      const auto j = nlohmann::json::parse(line);
      Attempt a;
      a.job_id = j.at("job_id").get<std::string>();
      a.nodes = j.value("nodes", "");
      a.start = j.value("start", "");
      a.end = j.value("end", "");
      a.reason = j.value("reason", "");
      a.restart = j.value("restart", int64_t{0});
      a.exit_status = j.value("exit_status", int64_t{0});
      if (j.contains("array_task_id") && j["array_task_id"].is_number_integer()) {
        a.array_task_id = j["array_task_id"].get<int64_t>();
      }
      if (j.contains("last_step") && j["last_step"].is_number_integer()) {
        a.last_step = j["last_step"].get<int64_t>();
      }
      // The step and node-loss fields are newer than the ledger: absent or null reads as unset.
      auto text = [&j](const char* key) {
        return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
      };
      auto seconds = [&j](const char* key) {
        return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>())
                                                     : std::nullopt;
      };
      if (j.contains("step") && j["step"].is_number_integer()) a.step = j["step"].get<int64_t>();
      if (j.contains("world_size") && j["world_size"].is_number_integer()) {
        a.world_size = j["world_size"].get<int64_t>();
      }
      a.lost_nodes = text("lost_nodes");
      a.added_nodes = text("added_nodes");
      a.detected = text("detected");
      a.detected_by = text("detected_by");
      a.stop_s = seconds("stop_s");
      a.recover_s = seconds("recover_s");
      a.cause = text("cause");
      a.excluded = text("excluded");
      a.avoided = text("avoided");
      out.push_back(a);
    } catch (const std::exception&) {
      ++bad;
    }
  }
  if (malformed) *malformed = bad;
  return out;
}

void append_attempt(const fs::path& dir, const Attempt& a) {
  nlohmann::ordered_json j;
  const auto optional = [](const auto& v) { return v ? nlohmann::ordered_json(*v) : nullptr; };
  j["job_id"] = a.job_id;
  j["array_task_id"] = optional(a.array_task_id);
  j["restart"] = a.restart;
  j["nodes"] = a.nodes;
  j["start"] = a.start;
  j["end"] = a.end;
  j["exit_status"] = a.exit_status;
  j["reason"] = a.reason;
  j["last_step"] = optional(a.last_step);
  j["step"] = a.step;
  j["world_size"] = optional(a.world_size);
  if (!a.lost_nodes.empty()) {
    j["lost_nodes"] = a.lost_nodes;
    j["added_nodes"] = a.added_nodes;
    j["cause"] = a.cause;
    j["detected"] = a.detected;
    j["detected_by"] = a.detected_by;
    j["stop_s"] = optional(a.stop_s);
    if (a.reason == "node_lost") j["recover_s"] = optional(a.recover_s);
  }
  if (!a.excluded.empty()) j["excluded"] = a.excluded;
  if (!a.avoided.empty()) j["avoided"] = a.avoided;
  append_line(dir / layout::kAttempts,
              j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

bool is_node_loss(const Attempt& a) {
  return a.reason == "node_lost" || a.reason == "node_lost_requeued";
}

size_t count_job_attempts(const std::vector<Attempt>& attempts) {
  std::set<std::pair<std::string, int64_t>> seen;
  for (const auto& a : attempts) seen.emplace(a.job_id, a.restart);
  return seen.size();
}

std::vector<NodeLoss> node_losses(const std::vector<Attempt>& attempts) {
  std::vector<NodeLoss> out;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const auto& a = attempts[i];
    if (!is_node_loss(a)) continue;
    NodeLoss n;
    n.line = i;
    for (size_t k = i + 1; k < attempts.size(); ++k) {
      if (attempts[k].job_id == a.job_id && attempts[k].restart == a.restart) {
        n.next_step_ended = true;
        n.next_world_size = attempts[k].world_size;
        break;
      }
    }
    const bool requeued = a.reason == "node_lost_requeued";
    n.outcome = requeued ? "requeued" : a.added_nodes.empty() ? "shrank" : "replaced";
    n.recovered = !requeued && a.recover_s.has_value();
    out.push_back(n);
  }
  return out;
}

std::optional<int64_t> last_committed_step(const fs::path& dir) {
  std::optional<int64_t> best;
  std::error_code ec;
  for (fs::directory_iterator it(dir / layout::kCheckpoints, ec), end; !ec && it != end;
       it.increment(ec)) {
    const auto step = layout::parse_checkpoint_name(it->path().filename().string());
    if (!step || !fs::exists(it->path() / layout::kManifest)) continue;
    if (!best || *step > *best) best = step;
  }
  return best;
}

std::optional<int64_t> checkpoint_age_s(const fs::path& dir, int64_t step) {
  std::error_code ec;
  const auto written = fs::last_write_time(layout::checkpoint_manifest(dir, step), ec);
  if (ec) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(fs::file_time_type::clock::now() -
                                                          written)
      .count();
}

std::vector<std::string> metrics_tail(const fs::path& dir) {
  std::ifstream in(dir / layout::kMetrics, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 65536);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  std::vector<std::string> lines;
  size_t start = 0;
  // A tail that starts mid-file starts mid-line: skip to the first newline.
  if (from > 0) start = tail.find('\n') == std::string::npos ? tail.size() : tail.find('\n') + 1;
  for (size_t end; (end = tail.find('\n', start)) != std::string::npos; start = end + 1) {
    if (end > start) lines.push_back(tail.substr(start, end - start));
  }
  return lines;
}

std::optional<std::string> last_metrics_line(const fs::path& dir) {
  const auto lines = metrics_tail(dir);
  if (lines.empty()) return std::nullopt;
  return lines.back();
}

std::map<std::string, std::string> last_metrics_by_kind(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& line : metrics_tail(dir)) {
    try {
      const auto j = nlohmann::json::parse(line);
      if (j.is_object() && j.contains("kind") && j["kind"].is_string()) {
        out[j["kind"].get<std::string>()] = line;
      }
    } catch (const nlohmann::json::exception&) {
      // A malformed line is skipped; status reports what it can.
    }
  }
  return out;
}

std::vector<MetricsRecord> read_metrics(const fs::path& dir, size_t* malformed) {
  std::vector<MetricsRecord> out;
  std::ifstream in(dir / layout::kMetrics, std::ios::binary);
  std::string line;
  size_t bad = 0;
  // getline also returns a last line without its newline: one still being written is not whole.
  while (std::getline(in, line)) {
    if (in.eof()) break;
    if (line.empty()) continue;
    try {
      const auto j = nlohmann::json::parse(line);
      if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string() || !j.contains("step") ||
          !j["step"].is_number_integer()) {
        ++bad;
        continue;
      }
      MetricsRecord r;
      r.kind = j["kind"].get<std::string>();
      r.step = j["step"].get<int64_t>();
      for (const auto& [key, value] : j.items()) {
        if (value.is_string() && key != "kind") r.texts[key] = value.get<std::string>();
        if (!value.is_number() || key == "step") continue;
        if (key == "epoch") {
          r.epoch = value.get<int64_t>();
        } else if (key == "wall_time") {
          r.wall_time = value.get<double>();
        } else {
          r.values[key] = value.get<double>();
        }
      }
      out.push_back(std::move(r));
    } catch (const nlohmann::json::exception&) {
      ++bad;
    }
  }
  if (malformed) *malformed = bad;
  return out;
}

}  // namespace hpctrain::run
