#include "run/run_dir.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/durable_file.hpp"
#include "common/run_layout.hpp"
#include "common/size_text.hpp"
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
  if (records::last_submission(run_dir)) return false;
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
  if (p.created.empty() || records::last_submission(p.run_dir)) return false;
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

std::vector<NodeLoss> node_losses(const std::vector<records::Attempt>& attempts) {
  std::vector<NodeLoss> out;
  for (size_t i = 0; i < attempts.size(); ++i) {
    const auto& a = attempts[i];
    if (!records::is_node_loss(a.reason)) continue;
    NodeLoss n;
    n.line = i;
    for (size_t k = i + 1; k < attempts.size(); ++k) {
      if (attempts[k].job_id == a.job_id && attempts[k].restart == a.restart) {
        n.next_step_ended = true;
        n.next_world_size = attempts[k].world_size;
        break;
      }
    }
    if (a.reason == records::Reason::kNodeLostRequeued) {
      n.outcome = "requeued";
    } else if (a.reason == records::Reason::kNodeLostChained) {
      n.outcome = "chained";
    } else {
      n.outcome = a.added_nodes.empty() ? "shrank" : "replaced";
    }
    n.recovered = a.reason == records::Reason::kNodeLost && a.recover_s.has_value();
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

bool finished_at_checkpoint(const fs::path& dir) {
  const auto step = last_committed_step(dir);
  if (!step) return false;
  std::ifstream in(dir / layout::kCheckpoints / layout::checkpoint_name(*step) / "trainer.json");
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const auto it = j.find("finished");
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

namespace {

uint64_t tree_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    const auto size = it->is_regular_file(size_ec) ? it->file_size(size_ec) : 0;
    if (!size_ec) total += size;
  }
  return total;
}

}  // namespace

std::string filesystem_trouble(const fs::path& dir) {
  const auto newest = last_committed_step(dir);
  const uint64_t need =
      newest ? tree_bytes(dir / layout::kCheckpoints / layout::checkpoint_name(*newest)) : 0;
  for (const fs::path& p : {dir, dir / layout::kCheckpoints}) {
    struct statvfs st {};
    if (::statvfs(p.c_str(), &st) != 0) continue;
    if (st.f_flag & ST_RDONLY) return p.string() + ": read-only";
    const uint64_t free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    if (free < std::max<uint64_t>(need, 1 << 20)) {
      return p.string() + ": " + common::size_text(free) + " free, less than " +
             (newest ? "the newest checkpoint took (" + common::size_text(need) + ")"
                     : std::string("1 MiB"));
    }
  }
  return "";
}

std::optional<int64_t> checkpoint_age_s(const fs::path& dir, int64_t step) {
  std::error_code ec;
  const auto written = fs::last_write_time(layout::checkpoint_manifest(dir, step), ec);
  if (ec) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(fs::file_time_type::clock::now() -
                                                          written)
      .count();
}

}  // namespace hpctrain::run
