// Which hpctrain-worker a run's attempts run (issue 41, provenance): the step supervisor, on the
// batch host before srun, identifies the worker binary by its resolved path, size, mtime and
// SHA-256, and compares a later attempt's binary with the first attempt's. Bitwise resume depends
// on every attempt running the same code, and users rebuild the worker on the shared filesystem
// while a run requeues for days. Torch-free (OpenSSL's libcrypto for the hash).
// Not yet done: the record in the run directory, the stop in the supervisor, status (issue 41).
// Thread safety: free functions without shared state.
#pragma once

#include <cstdint>
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

}  // namespace hpctrain::supervisor
