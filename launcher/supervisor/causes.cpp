#include "supervisor/causes.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "common/exit_codes.hpp"

namespace hpctrain::supervisor {

namespace {

using records::Cause;

bool has(std::string_view text, std::string_view what) {
  return std::search(text.begin(), text.end(), what.begin(), what.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != text.end();
}

std::string clip(std::string_view text) {
  std::string out(text.substr(0, kEvidenceChars));
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  const auto first = out.find_first_not_of(" \t");
  return first == std::string::npos ? std::string() : out.substr(first);
}

// Slurm's banner for a job or step it ended ("*** JOB 12 ON node1 CANCELLED AT 2026-11-27T10:00:00
// DUE TO TIME LIMIT ***", slurmstepd's, in the step's stderr).
// A step's banner says cancelled (plain, or "DUE to SIGNAL Killed") also when srun's
// --kill-on-bad-exit or the step supervisor itself killed the step: only the job's banner means
// the user cancelled it.
std::optional<Cause> banner_cause(std::string_view line) {
  if (!has(line, "*** ") || !has(line, " CANCELLED AT ")) return std::nullopt;
  if (has(line, "DUE TO TIME LIMIT")) return Cause::kTimeLimit;
  if (has(line, "DUE TO PREEMPTION") || has(line, "DUE TO JOB REQUEUE")) return Cause::kPreempted;
  if (has(line, "DUE TO NODE FAIL")) return Cause::kNodeLost;
  if (has(line, "DUE TO TASK FAILURE") || !has(line, "*** JOB ")) return std::nullopt;
  return Cause::kCancelled;
}

// A worker's own end line: "hpctrain-worker ended: bad_input (exit status 2): ...".
std::optional<Cause> worker_end_cause(std::string_view line) {
  const auto at = line.find(kWorkerEndMarker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(at + std::string_view(kWorkerEndMarker).size());
  rest = rest.substr(0, rest.find_first_of(" :("));
  const auto cause = records::parse<Cause>(rest);
  if (!cause || *cause == Cause::kCompleted) return std::nullopt;
  return cause;
}

// The messages, by cause, in the order of precedence: an originating cause before its
// consequences. Matched case-insensitively anywhere in the line.
struct Pattern {
  Cause cause;
  std::vector<std::string_view> texts;
};
const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> kPatterns = {
      {Cause::kNodeLost, {"Node failure on ", "failed on node "}},
      {Cause::kGpuHardware,
       {"NVRM: Xid", "ECC error", "uncorrectable ECC", "double bit error", "fallen off the bus",
        "GPU is lost", "unspecified launch failure", "uncorrectable NVLink",
        "cudaErrorECCUncorrectable", "cudaErrorHardwareStackError", "hardware stack error",
        "CUDA-capable device(s) is/are busy or unavailable", "cudaErrorDevicesUnavailable",
        "contained ECC error", "uncontained ECC error", "uncorrectable error was encountered",
        "NVML_ERROR_GPU_IS_LOST", "GPU has fallen"}},
      {Cause::kOom,
       {"oom_kill", "oom-kill", "Out Of Memory", "OutOfMemoryError", "std::bad_alloc",
        "can't allocate memory", "Cannot allocate memory", "out of memory", "OOM Killed",
        "OOM killer", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation",
        "exceeded memory limit"}},
      {Cause::kFilesystem,
       {"No space left on device", "Read-only file system", "Input/output error",
        "Disk quota exceeded", "Stale file handle", "ENOSPC", "EROFS", "EDQUOT",
        "Stale NFS file handle", "quota exceeded", "checkpoint commit failed", "file write failed",
        "client was evicted by"}},
      {Cause::kBadInput,
       {"file signature not found", "bad spec:", "not an HDF5 file", "truncated file",
        "error message = 'No such file or directory'", "error message = 'Is a directory'",
        "doesn't exist", "is not registered"}},
      {Cause::kNetwork,
       {"Connection reset by peer",
        "Connection closed by peer",
        "Broken pipe",
        "NCCL error",
        "ncclRemoteError",
        "ncclSystemError",
        "ncclInternalError",
        "remote process exited or there was a network error",
        "NET/Socket",
        "NET/IB",
        "Socket Timeout",
        "DistNetworkError",
        "Watchdog caught collective operation timeout",
        "Connection refused",
        "No route to host",
        "Network is unreachable",
        "Connection timed out",
        "Connection closed",
        "ibv_",
        "transport retry counter exceeded",
        "Gloo connectFullMesh failed",
        "gloo::IoException",
        "Timed out waiting",
        "client socket has timed out",
        "Connection was likely closed",
        "Failed to recv"}},
  };
  return kPatterns;
}

// The rank of a cause among the patterns (lower: more telling); banners and end lines first.
int precedence(Cause cause) {
  const auto& p = patterns();
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].cause == cause) return static_cast<int>(i);
  }
  return -1;
}

std::optional<Cause> message_cause(std::string_view line) {
  for (const auto& p : patterns()) {
    for (const auto& t : p.texts) {
      if (has(line, t)) return p.cause;
    }
  }
  return std::nullopt;
}

bool own_line(std::string_view line) {
  const auto first = line.find_first_not_of(" \t");
  return first != std::string_view::npos && line.substr(first).rfind("hpctrain: ", 0) == 0;
}

Classified from_state(const std::string& state) {
  const auto is = [&](std::string_view s) { return state.rfind(s, 0) == 0; };
  const std::string evidence = "Slurm: job state " + state;
  if (is("TIMEOUT") || is("DEADLINE")) return {Cause::kTimeLimit, evidence};
  if (is("PREEMPTED") || is("REQUEUE") || is("PENDING")) return {Cause::kPreempted, evidence};
  if (is("NODE_FAIL")) return {Cause::kNodeLost, evidence};
  if (is("OUT_OF_MEMORY")) return {Cause::kOom, evidence};
  if (is("CANCELLED")) return {Cause::kCancelled, evidence};
  return {Cause::kUnknown, ""};
}

}  // namespace

std::optional<Cause> cause_of_line(std::string_view line) {
  if (own_line(line)) return std::nullopt;
  if (auto c = banner_cause(line)) return c;
  if (auto c = worker_end_cause(line)) return c;
  return message_cause(line);
}

namespace {

// The most telling of the workers' own end lines, and of the messages, with their lines.
struct Found {
  std::optional<Cause> worker, message;
  std::string worker_line, message_line;
};

Found scan(const std::vector<std::string>& lines) {
  Found f;
  for (const auto& line : lines) {
    if (own_line(line)) continue;
    if (auto c = worker_end_cause(line)) {
      if (!f.worker || precedence(*c) < precedence(*f.worker) || *c == *f.worker) {
        f.worker = c;
        f.worker_line = line;
      }
    } else if (auto m = message_cause(line)) {
      if (!f.message || precedence(*m) <= precedence(*f.message)) {
        f.message = m;
        f.message_line = line;
      }
    }
  }
  return f;
}

// What the step's exit status says on its own, where it says enough.
std::optional<Classified> from_status(int status, const std::vector<std::string>& lines,
                                      const Found& found) {
  switch (status) {
    case kExitRequeue: {
      // The workers' stop line says which: "stopping at step N (the job's time limit is near)".
      for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        if (has(*it, "stopping at step") && has(*it, "time limit")) {
          return Classified{Cause::kTimeLimit, clip(*it)};
        }
      }
      for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        if (has(*it, "stopping at step")) return Classified{Cause::kPreempted, clip(*it)};
      }
      return Classified{Cause::kPreempted,
                        "exit status 75: the workers checkpointed to be requeued"};
    }
    case kExitBadInput:
      return Classified{Cause::kBadInput,
                        found.message ? clip(found.message_line) : "exit status 2: bad input"};
    case kExitHang:
      return Classified{Cause::kHang, "exit status 77: the hang watchdog stopped the ranks"};
    case kExitEvict:
      return Classified{Cause::kStraggler, "exit status 78: a straggler's node was let go"};
    case kExitDiverged:
      return Classified{Cause::kDiverged, "exit status 79: the loss diverged"};
    default:
      return std::nullopt;
  }
}

// Nothing said why: TERM without Slurm's word, or the last lines read, for the user to see.
Classified unknown(const EndFacts& f) {
  if (f.terminated) {
    return {Cause::kUnknown,
            "TERM came to the batch job and Slurm did not say why" +
                (f.slurm_state.empty() ? std::string() : " (job state " + f.slurm_state + ")")};
  }
  std::vector<std::string> last;
  for (auto it = f.lines.rbegin(); it != f.lines.rend() && last.size() < 3; ++it) {
    if (!own_line(*it) && !clip(*it).empty()) last.push_back(clip(*it));
  }
  std::string evidence = "exit status " + std::to_string(f.status);
  for (auto it = last.rbegin(); it != last.rend(); ++it) evidence += " | " + *it;
  return {Cause::kUnknown, evidence.substr(0, kEvidenceChars)};
}

}  // namespace

Classified classify(const EndFacts& f) {
  using records::LossCause;
  if (f.node_lost) {
    const Cause c = *f.node_lost == LossCause::kHang          ? Cause::kHang
                    : *f.node_lost == LossCause::kStraggler   ? Cause::kStraggler
                    : *f.node_lost == LossCause::kGpuHardware ? Cause::kGpuHardware
                    : *f.node_lost == LossCause::kCorruption  ? Cause::kGpuHardware
                                                              : Cause::kNodeLost;
    return {c, clip(f.loss_text)};
  }
  // Slurm's own word: its banner in the output, or the job's state once TERM came.
  for (auto it = f.lines.rbegin(); it != f.lines.rend(); ++it) {
    if (own_line(*it)) continue;
    if (auto c = banner_cause(*it)) return {*c, clip(*it)};
  }
  if (!f.slurm_state.empty() && f.slurm_state != "RUNNING") {
    auto c = from_state(f.slurm_state);
    if (c.cause != Cause::kUnknown) return c;
  }
  if (f.status == kExitOk) {
    if (f.finished) return {Cause::kCompleted, ""};
    if (!f.filesystem.empty()) return {Cause::kFilesystem, clip(f.filesystem)};
    return {Cause::kUnknown,
            "srun exited 0 but rank 0 recorded no end of training (were the tasks launched?)"};
  }
  const Found found = scan(f.lines);
  // A worker that knew why it ended says so; "unknown" from a worker defers to the messages.
  if (found.worker && *found.worker != Cause::kUnknown &&
      (!found.message || precedence(*found.worker) <= precedence(*found.message))) {
    return {*found.worker, clip(found.worker_line)};
  }
  if (auto c = from_status(f.status, f.lines, found)) return *c;
  // The filesystem's state where no message says as much (its lines may have been lost with it),
  // or where only a consequence (a peer's reset connection) was seen.
  if (!f.filesystem.empty() &&
      (!found.message || precedence(Cause::kFilesystem) < precedence(*found.message))) {
    return {Cause::kFilesystem, clip(f.filesystem)};
  }
  if (found.message) return {*found.message, clip(found.message_line)};
  return unknown(f);
}

std::string advice_for(Cause cause, int64_t batch_size) {
  switch (cause) {
    case Cause::kOom:
      return "lower train.batch_size (" + std::to_string(batch_size) +
             " per rank now), or ask for more memory per node (job.mem)";
    case Cause::kBadInput:
      return "fix the spec, the data or the environment named above, then 'hpctrain submit' "
             "again (the run resumes from its last checkpoint)";
    case Cause::kDiverged:
      return "lower train.optimizer.lr or add warm-up (train.schedule), or use bf16 rather "
             "than fp16; then 'hpctrain submit' again";
    case Cause::kFilesystem:
      return "free space or quota on the run directory's filesystem (or move job.run_dir), "
             "then 'hpctrain submit' again";
    default:
      return "";
  }
}

}  // namespace hpctrain::supervisor
