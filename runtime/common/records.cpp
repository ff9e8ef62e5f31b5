#include "common/records.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "common/durable_file.hpp"
#include "common/error.hpp"
#include "common/run_layout.hpp"

namespace hpctrain::records {
namespace {

using nlohmann::json;

// ---- The metrics records' fields, each named once: the writer, the reader and field_names()
// visit these lists. A field passed as std::optional is left out when absent, unless it is
// marked Absent::kNull (written as null).

enum class Absent { kOmit, kNull };

template <typename V>
void fields(TrainRecord& r, V& v) {
  v(field::kStep, r.step);
  v(field::kEpoch, r.epoch);
  v(field::kLoss, r.loss);
  v(field::kLr, r.lr);
  v(field::kImagesPerS, r.images_per_s);
  v(field::kWindowFirstStep, r.window_first_step);
  v(field::kWindowSeconds, r.window_seconds);
  v(field::kLossScale, r.loss_scale);
  v(field::kCheckpointSeconds, r.checkpoint_seconds);
  v(field::kWallTime, r.wall_time);
}

template <typename V>
void fields(EvalRecord& r, V& v) {
  v(field::kStep, r.step);
  v(field::kEpoch, r.epoch);
  v(field::kLoss, r.loss);
  v(field::kTop1, r.top1);
  v(field::kTop5, r.top5);
  v(field::kSamples, r.samples);
  v(field::kSeconds, r.seconds);
  v(field::kWallTime, r.wall_time);
}

template <typename V>
void fields(RanksRecord& r, V& v) {
  v(field::kStep, r.step);
  v(field::kBusyP50, r.busy_p50_s);
  v(field::kBusyP95, r.busy_p95_s);
  v(field::kSlowestRank, r.slowest_rank);
  v(field::kSlowestHost, r.slowest_host, Absent::kNull);
  v(field::kMedianBusy, r.median_busy_s);
  v(field::kSlowestBusy, r.slowest_busy_s);
  v(field::kBehindRank, r.behind_rank);
  v(field::kWallTime, r.wall_time);
}

template <typename V>
void fields(StartedRecord& r, V& v) {
  v(field::kStep, r.step);
  v(field::kEpoch, r.epoch);
  v(field::kWorldSize, r.world_size);
  v(field::kResumedFrom, r.resumed_from, Absent::kNull);
  v(field::kTag, r.tag);
  v(field::kVersion, r.version);
  v(field::kWallTime, r.wall_time);
}

template <typename V>
void fields(SuspectsRecord& r, V& v) {
  v(field::kTag, r.tag);
  v(field::kStep, r.step);
  v(field::kRanks, r.ranks);
  v(field::kHosts, r.hosts);
  v(field::kMessage, r.message);
  v(field::kWallTime, r.wall_time);
}

template <typename V>
void fields(RollbackRecord& r, V& v) {
  v(field::kStep, r.step);
  v(field::kRolledBackTo, r.rolled_back_to);
  v(field::kSkippedFrom, r.skipped_from);
  v(field::kSamplesSkipped, r.samples_skipped);
  v(field::kRollbacks, r.rollbacks);
  v(field::kMessage, r.message);
  v(field::kWallTime, r.wall_time);
}

// Writes each field into a JSON object.
struct Writer {
  json& j;
  void operator()(const char* name, int64_t v) { j[name] = v; }
  void operator()(const char* name, const std::string& v) { j[name] = v; }
  template <typename T>
  void operator()(const char* name, const std::vector<T>& v) {
    j[name] = v;
  }
  template <typename T>
  void operator()(const char* name, const std::optional<T>& v, Absent absent = Absent::kOmit) {
    if (v) {
      j[name] = *v;  // a NaN is dumped as null
    } else if (absent == Absent::kNull) {
      j[name] = nullptr;
    }
  }
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reads each field from a JSON object: a field of another type reads as absent, a null number as
// NaN (the worker's spelling of a number that is not finite).
struct Reader {
  const json& j;

  const json* find(const char* name) const {
    const auto it = j.find(name);
    return it == j.end() ? nullptr : &*it;
  }
  // The step, checked by the caller.
  void operator()(const char* name, int64_t& v) { v = j.at(name).get<int64_t>(); }
  void operator()(const char* name, std::string& v) {
    if (const json* f = find(name); f && f->is_string()) v = f->get<std::string>();
  }
  void operator()(const char* name, std::vector<double>& v) {
    const json* f = find(name);
    if (!f || !f->is_array()) return;
    // One value per rank: a value that is not a number keeps its place, as NaN.
    for (const auto& e : *f) v.push_back(e.is_number() ? e.get<double>() : kNaN);
  }
  void operator()(const char* name, std::vector<int64_t>& v) {
    const json* f = find(name);
    if (!f || !f->is_array()) return;
    for (const auto& e : *f) {
      if (e.is_number_integer()) v.push_back(e.get<int64_t>());
    }
  }
  void operator()(const char* name, std::vector<std::string>& v) {
    const json* f = find(name);
    if (!f || !f->is_array()) return;
    for (const auto& e : *f) {
      if (e.is_string()) v.push_back(e.get<std::string>());
    }
  }
  void operator()(const char* name, std::optional<double>& v, Absent = Absent::kOmit) {
    const json* f = find(name);
    if (f && f->is_number()) v = f->get<double>();
    if (f && f->is_null()) v = kNaN;
  }
  void operator()(const char* name, std::optional<int64_t>& v, Absent = Absent::kOmit) {
    if (const json* f = find(name); f && f->is_number()) v = f->get<int64_t>();
  }
  void operator()(const char* name, std::optional<std::string>& v, Absent = Absent::kOmit) {
    if (const json* f = find(name); f && f->is_string()) v = f->get<std::string>();
  }
};

// Collects the names.
struct Namer {
  std::vector<std::string>& names;
  template <typename... Rest>
  void operator()(const char* name, Rest&&...) {
    names.push_back(name);
  }
};

template <typename R>
MetricsRecord read_as(const json& j) {
  R r;
  Reader reader{j};
  fields(r, reader);
  return r;
}

MetricsRecord read_record(MetricsKind kind, const json& j) {
  switch (kind) {
    case MetricsKind::kTrain:
      return read_as<TrainRecord>(j);
    case MetricsKind::kEval:
      return read_as<EvalRecord>(j);
    case MetricsKind::kRanks:
      return read_as<RanksRecord>(j);
    case MetricsKind::kStarted:
      return read_as<StartedRecord>(j);
    case MetricsKind::kRollback:
      return read_as<RollbackRecord>(j);
    case MetricsKind::kHang:
    case MetricsKind::kEvict:
    case MetricsKind::kCorrupt:
      break;
  }
  auto r = std::get<SuspectsRecord>(read_as<SuspectsRecord>(j));
  r.kind = kind;
  return r;
}

// The bytes of `path`, all of them or the last `tail` (0: all); `cut` says whether the text starts
// after the file's start (mid-line). One open and one read; a missing file reads as empty.
std::string read_bytes(const fs::path& path, size_t tail, bool* cut) {
  *cut = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size <= 0) return {};
  std::streamoff from = 0;
  if (tail > 0) from = std::max<std::streamoff>(0, size - static_cast<std::streamoff>(tail));
  *cut = from > 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// The records of `text`'s complete lines (empty ones skipped); a text that starts mid-line
// starts at its first newline.
MetricsRead parse_lines(std::string_view text, bool starts_mid_line) {
  MetricsRead out;
  size_t start = 0;
  if (starts_mid_line) {
    const size_t nl = text.find('\n');
    start = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  std::string_view last;
  for (size_t end; (end = text.find('\n', start)) != std::string_view::npos; start = end + 1) {
    if (end == start) continue;
    last = text.substr(start, end - start);
    LineStatus status = LineStatus::kMalformed;
    if (auto r = parse_metrics_line(last, &status)) {
      out.records.push_back(std::move(*r));
    } else if (status == LineStatus::kMalformed) {
      ++out.malformed;
    }
  }
  if (!last.empty()) out.last_line = std::string(last);
  return out;
}

// A field of a ledger or submission line that is absent or null reads as unset; any other type
// than the one asked for makes the line malformed (nlohmann's type_error), as it always did.
std::string text_field(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

template <typename T>
std::optional<T> number_field(const json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  if constexpr (std::is_integral_v<T>) {
    if (!j[key].is_number_integer()) return std::nullopt;
  } else if (!j[key].is_number()) {
    return std::nullopt;
  }
  return j[key].get<T>();
}

}  // namespace

// ---- Reasons

bool is_requeue(Reason reason) {
  return reason == Reason::kRequeued || reason == Reason::kFailedRequeued ||
         reason == Reason::kNodeLostRequeued;
}

bool is_chain(Reason reason) {
  return reason == Reason::kChained || reason == Reason::kFailedChained ||
         reason == Reason::kNodeLostChained;
}

Reason chained(Reason reason) {
  switch (reason) {
    case Reason::kRequeued:
      return Reason::kChained;
    case Reason::kFailedRequeued:
      return Reason::kFailedChained;
    case Reason::kNodeLostRequeued:
      return Reason::kNodeLostChained;
    default:
      return reason;
  }
}

bool is_node_loss(Reason reason) {
  return reason == Reason::kNodeLost || reason == Reason::kNodeLostRequeued ||
         reason == Reason::kNodeLostChained;
}

bool is_failure(Reason reason) {
  return reason == Reason::kFailed || reason == Reason::kFailedRequeued ||
         reason == Reason::kFailedChained;
}

bool is_final(Reason reason) {
  switch (reason) {
    case Reason::kCompleted:
    case Reason::kFailed:
    case Reason::kRestartLimit:
    case Reason::kNoProgress:
    case Reason::kSetupFailed:
    case Reason::kTerminated:
      return true;
    case Reason::kRequeued:
    case Reason::kFailedRequeued:
    case Reason::kNodeLost:
    case Reason::kNodeLostRequeued:
    case Reason::kChained:
    case Reason::kFailedChained:
    case Reason::kNodeLostChained:
      return false;
  }
  return false;
}

// ---- metrics.jsonl

MetricsKind kind_of(const MetricsRecord& record) {
  return std::visit(
      [](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, TrainRecord>) {
          return MetricsKind::kTrain;
        } else if constexpr (std::is_same_v<R, EvalRecord>) {
          return MetricsKind::kEval;
        } else if constexpr (std::is_same_v<R, RanksRecord>) {
          return MetricsKind::kRanks;
        } else if constexpr (std::is_same_v<R, StartedRecord>) {
          return MetricsKind::kStarted;
        } else if constexpr (std::is_same_v<R, RollbackRecord>) {
          return MetricsKind::kRollback;
        } else {
          return r.kind;
        }
      },
      record);
}

std::vector<std::string> hosts_of_ranks(const std::vector<int64_t>& ranks,
                                        const std::vector<std::string>& rank_hosts) {
  std::vector<std::string> out;
  for (const int64_t r : ranks) {
    if (r < 0 || static_cast<size_t>(r) >= rank_hosts.size() || rank_hosts[r].empty()) continue;
    if (std::find(out.begin(), out.end(), rank_hosts[r]) == out.end()) out.push_back(rank_hosts[r]);
  }
  return out;
}

json to_json(const MetricsRecord& record) {
  const MetricsKind kind = kind_of(record);
  if (std::holds_alternative<SuspectsRecord>(record) && kind != MetricsKind::kHang &&
      kind != MetricsKind::kEvict && kind != MetricsKind::kCorrupt) {
    throw std::invalid_argument("a suspects record is a hang, evict or corrupt record, not " +
                                std::string(name_of(kind)));
  }
  json j = json::object();
  std::visit(
      [&j](auto copy) {
        Writer writer{j};
        fields(copy, writer);
      },
      record);
  j[field::kKind] = std::string(name_of(kind));
  return j;
}

std::string to_line(const MetricsRecord& record) { return to_json(record).dump(); }

std::optional<MetricsRecord> parse_metrics_line(std::string_view line, LineStatus* status) {
  const auto say = [status](LineStatus s) {
    if (status) *status = s;
  };
  say(LineStatus::kMalformed);
  const json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains(field::kKind) || !j[field::kKind].is_string() ||
      !j.contains(field::kStep) || !j[field::kStep].is_number_integer()) {
    return std::nullopt;
  }
  const auto kind = parse<MetricsKind>(j[field::kKind].get<std::string>());
  if (!kind) {
    say(LineStatus::kUnknownKind);
    return std::nullopt;
  }
  try {
    auto record = read_record(*kind, j);
    say(LineStatus::kRecord);
    return record;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

MetricsRead read_metrics(const fs::path& run_dir) {
  bool cut = false;
  const std::string text = read_bytes(run_dir / layout::kMetrics, 0, &cut);
  return parse_lines(text, cut);
}

MetricsRead read_metrics_tail(const fs::path& run_dir, size_t bytes) {
  bool cut = false;
  const std::string text = read_bytes(run_dir / layout::kMetrics, std::max<size_t>(bytes, 1), &cut);
  return parse_lines(text, cut);
}

MetricsLog::MetricsLog(const fs::path& path)
    : path_(path), fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) {
  if (!fd_.valid()) {
    HPCTRAIN_THROW(rt::Error, "cannot open " + path.string() + ": " + std::strerror(errno));
  }
}

void MetricsLog::write(const MetricsRecord& record) { write_line(to_line(record)); }

void MetricsLog::write_line(const std::string& text) {
  const std::string line = text + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      HPCTRAIN_THROW(rt::Error, "cannot write " + path_.string() + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

void append_metrics(const fs::path& run_dir, const MetricsRecord& record) {
  MetricsLog(run_dir / layout::kMetrics).write(record);
}

// ---- attempts.jsonl

std::string to_line(const Attempt& a) {
  nlohmann::ordered_json j;
  const auto optional = [](const auto& v) { return v ? nlohmann::ordered_json(*v) : nullptr; };
  j[field::kJobId] = a.job_id;
  j[field::kArrayTaskId] = optional(a.array_task_id);
  j[field::kRestart] = a.restart;
  j[field::kNodes] = a.nodes;
  j[field::kStart] = a.start;
  j[field::kEnd] = a.end;
  j[field::kExitStatus] = a.exit_status;
  j[field::kReason] = std::string(name_of(a.reason));
  if (a.cause) j[field::kCause] = std::string(name_of(*a.cause));
  if (!a.evidence.empty()) j[field::kEvidence] = a.evidence;
  j[field::kLastStep] = optional(a.last_step);
  j[field::kStep] = a.srun_step;
  j[field::kWorldSize] = optional(a.world_size);
  if (!a.lost_nodes.empty()) {
    j[field::kLostNodes] = a.lost_nodes;
    j[field::kAddedNodes] = a.added_nodes;
    j[field::kLossKind] = a.loss ? std::string(name_of(*a.loss)) : std::string();
    j[field::kDetected] = a.detected;
    j[field::kDetectedBy] = a.detected_by;
    j[field::kStopS] = optional(a.stop_s);
    if (a.reason == Reason::kNodeLost) j[field::kRecoverS] = optional(a.recover_s);
  }
  if (!a.excluded.empty()) j[field::kExcluded] = a.excluded;
  if (!a.avoided.empty()) j[field::kAvoided] = a.avoided;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<Attempt> parse_attempt_line(std::string_view line) {
  try {
    const auto j = json::parse(line.begin(), line.end());
    Attempt a;
    a.job_id = j.at(field::kJobId).get<std::string>();
    const auto reason = parse<Reason>(j.value(field::kReason, ""));
    if (!reason) return std::nullopt;
    a.reason = *reason;
    a.nodes = j.value(field::kNodes, "");
    a.start = j.value(field::kStart, "");
    a.end = j.value(field::kEnd, "");
    a.restart = j.value(field::kRestart, int64_t{0});
    a.exit_status = j.value(field::kExitStatus, int64_t{0});
    a.array_task_id = number_field<int64_t>(j, field::kArrayTaskId);
    a.last_step = number_field<int64_t>(j, field::kLastStep);
    // The step and node-loss fields are newer than the ledger: absent or null reads as unset.
    a.srun_step = number_field<int64_t>(j, field::kStep).value_or(0);
    a.world_size = number_field<int64_t>(j, field::kWorldSize);
    a.lost_nodes = text_field(j, field::kLostNodes);
    a.added_nodes = text_field(j, field::kAddedNodes);
    if (const std::string loss = text_field(j, field::kLossKind); !loss.empty()) {
      a.loss = parse<LossCause>(loss);
      if (!a.loss) return std::nullopt;
    }
    if (const std::string cause = text_field(j, field::kCause); !cause.empty()) {
      a.cause = parse<Cause>(cause);
      // A ledger older than causes wrote how a node loss was found as its "cause".
      const auto old = parse<LossCause>(cause);
      if (old && !a.loss && !a.lost_nodes.empty()) {
        a.loss = old;
        if (!a.cause) a.cause = Cause::kNodeLost;
      }
      if (!a.cause) return std::nullopt;
    }
    a.evidence = text_field(j, field::kEvidence);
    a.detected = text_field(j, field::kDetected);
    a.detected_by = text_field(j, field::kDetectedBy);
    a.stop_s = number_field<double>(j, field::kStopS);
    a.recover_s = number_field<double>(j, field::kRecoverS);
    a.excluded = text_field(j, field::kExcluded);
    a.avoided = text_field(j, field::kAvoided);
    return a;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::vector<Attempt> read_attempts(const fs::path& run_dir, size_t* malformed) {
  std::vector<Attempt> out;
  std::ifstream in(run_dir / layout::kAttempts);
  std::string line;
  size_t bad = 0;
  while (std::getline(in, line)) {
    if (auto a = parse_attempt_line(line)) {
      out.push_back(std::move(*a));
    } else {
      ++bad;
    }
  }
  if (malformed) *malformed = bad;
  return out;
}

void append_attempt(const fs::path& run_dir, const Attempt& attempt) {
  const fs::path ledger = run_dir / layout::kAttempts;
  std::error_code ec;
  uintmax_t before = fs::file_size(ledger, ec);
  if (ec) before = 0;
  try {
    common::append_line(ledger, to_line(attempt));
  } catch (const common::FileError&) {
    // A short write leaves part of the line: cut it off, or the next line would join it.
    fs::resize_file(ledger, before, ec);
    if (!fs::remove(run_dir / layout::kLedgerReserve, ec)) throw;
    common::append_line(ledger, to_line(attempt));
  }
}

bool reserve_ledger_room(const fs::path& run_dir) {
  const fs::path reserve = run_dir / layout::kLedgerReserve;
  std::error_code ec;
  if (fs::file_size(reserve, ec) == kLedgerRoomBytes && !ec) return true;
  try {
    common::write_file_atomic(reserve, std::string(kLedgerRoomBytes, '\0'));
    return true;
  } catch (const common::FileError&) {
    fs::remove(reserve, ec);
    return false;
  }
}

size_t count_job_attempts(const std::vector<Attempt>& attempts) {
  std::set<std::pair<std::string, int64_t>> seen;
  for (const auto& a : attempts) seen.emplace(a.job_id, a.restart);
  return seen.size();
}

// ---- submissions.jsonl

std::string to_line(const Submission& s) {
  json j = {{field::kJobId, s.job_id},
            {field::kSubmittedAt, s.submitted_at},
            {field::kArrayTasks, s.array_tasks}};
  if (!s.chained_from.empty()) j[field::kChainedFrom] = s.chained_from;
  return j.dump();
}

std::optional<Submission> parse_submission_line(std::string_view line) {
  try {
    const auto j = json::parse(line.begin(), line.end());
    Submission s;
    s.job_id = j.at(field::kJobId).get<std::string>();
    s.submitted_at = j.value(field::kSubmittedAt, "");
    s.array_tasks = j.value(field::kArrayTasks, size_t{0});
    s.chained_from = j.value(field::kChainedFrom, "");
    return s;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::vector<Submission> read_submissions(const fs::path& run_dir, size_t* malformed) {
  std::vector<Submission> out;
  std::ifstream in(run_dir / layout::kSubmissions);
  std::string line;
  size_t bad = 0;
  while (std::getline(in, line)) {
    if (auto s = parse_submission_line(line)) {
      out.push_back(std::move(*s));
    } else {
      ++bad;  // a torn last line (a crash mid-append) leaves the previous record in force
    }
  }
  if (malformed) *malformed = bad;
  return out;
}

std::optional<Submission> last_submission(const fs::path& run_dir) {
  auto all = read_submissions(run_dir);
  if (all.empty()) return std::nullopt;
  return std::move(all.back());
}

std::vector<Submission> last_chain(const std::vector<Submission>& submissions) {
  std::vector<Submission> out;
  if (submissions.empty()) return out;
  out.push_back(submissions.back());
  // Back from the last line: each link's predecessor is the latest earlier line of that job.
  for (size_t i = submissions.size() - 1; i-- > 0 && !out.back().chained_from.empty();) {
    if (submissions[i].job_id == out.back().chained_from) out.push_back(submissions[i]);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void append_submission(const fs::path& run_dir, const Submission& submission) {
  common::append_line(run_dir / layout::kSubmissions, to_line(submission));
}

// ---- Field names

std::vector<std::pair<std::string, std::vector<std::string>>> field_names() {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  const auto add = [&out](MetricsKind kind, auto record) {
    std::vector<std::string> names = {field::kKind};
    Namer namer{names};
    fields(record, namer);
    out.emplace_back(std::string(name_of(kind)), names);
  };
  add(MetricsKind::kTrain, TrainRecord{});
  add(MetricsKind::kEval, EvalRecord{});
  add(MetricsKind::kRanks, RanksRecord{});
  add(MetricsKind::kStarted, StartedRecord{});
  add(MetricsKind::kHang, SuspectsRecord{});
  add(MetricsKind::kEvict, SuspectsRecord{});
  add(MetricsKind::kRollback, RollbackRecord{});
  add(MetricsKind::kCorrupt, SuspectsRecord{});
  // The ledger's and the submissions' writers say which fields they write when every one is set.
  const auto keys = [](const std::string& line) {
    std::vector<std::string> names;
    const auto object = nlohmann::ordered_json::parse(line);
    for (const auto& item : object.items()) names.push_back(item.key());
    return names;
  };
  Attempt a;
  a.reason = Reason::kNodeLost;
  a.cause = Cause::kNodeLost;
  a.lost_nodes = a.excluded = a.avoided = a.evidence = "n";
  out.emplace_back("attempt", keys(to_line(a)));
  Submission s;
  s.chained_from = "1";
  out.emplace_back("submission", keys(to_line(s)));
  return out;
}

}  // namespace hpctrain::records
