// Which hpctrain-worker a run's attempts run (issue 41, provenance): the step supervisor, on the
// batch host before srun, identifies the worker binary by its resolved path, size, mtime and
// SHA-256, and compares a later attempt's binary with the first attempt's. Bitwise resume depends
// on every attempt running the same code, and users rebuild the worker on the shared filesystem
// while a run requeues for days. Torch-free (OpenSSL's libcrypto for the hash).
// The record is the run directory's provenance.json (docs/run-directory.md): the first attempt's
// binary, the launcher's version, and each later change let through.
// Thread safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace hpctrain::supervisor {

struct BinaryIdentity {
  std::string path;     // as resolved (symlinks followed): what srun will execute
  uint64_t size = 0;    // bytes
  int64_t mtime_s = 0;  // seconds since the epoch
  std::string sha256;   // 64 lowercase hex digits
};

// Identifies the file at `path`. Throws hpctrain::Error naming the path where it is missing or
// cannot be read (never a crash: the supervisor records the error as the attempt's end).
BinaryIdentity identify_binary(const std::string& path);

// nullopt where `now` has the same hash as `first`; otherwise one line saying what changed, old
// against new (hash prefix, size, mtime, path), for the attempt's first line.
std::optional<std::string> describe_change(const BinaryIdentity& first, const BinaryIdentity& now);

// What an attempt does about its worker binary before its first step.
struct ProvenanceCheck {
  std::string line;   // for the job's log ("" when there is nothing to say)
  bool stop = false;  // the binary changed and resilience.require_same_binary is on
};

// The run's first attempt records `worker`'s identity in task_dir/provenance.json; a later one
// compares. A change stops the attempt where `require_same`, with a line naming the run
// directory, both binaries and the key; otherwise it is let through and appended to the record.
// A missing worker is left to srun to report; one that cannot be identified otherwise, or a record
// that cannot be read, is said and not checked (a damaged record is left as it is). `job`: the
// attempt's job.
ProvenanceCheck check_provenance(const std::filesystem::path& task_dir, const std::string& worker,
                                 bool require_same, const std::string& job);

}  // namespace hpctrain::supervisor
