// The runtime's errors: one small hierarchy, each message prefixed with where it happened,
// "[rank 3/16 node017] file.cpp:42: ", as nccl-tests does, so one line of a 512-rank log is
// enough to act on. The rank prefix comes from a process-wide context set once the rank is known.
// Thread safety: set_rank_context() is called once, before other threads start; reads are safe.
#pragma once

#include <stdexcept>
#include <string>

namespace hpctrain::rt {

// Sets the "[rank r/N host]" prefix of every later error.
void set_rank_context(int rank, int world_size, const std::string& host);
// "[rank r/N host] " or "[host] " before the rank is known.
std::string rank_prefix();

// Base of the runtime's errors.
class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line);
};

// The job cannot go on because a peer is gone or did not arrive (rendezvous, collectives).
class PeerError : public Error {
 public:
  using Error::Error;
};

// A C library (PMIx, Gloo, NCCL, CUDA, HDF5) reported an error; the message carries its text.
class LibraryError : public Error {
 public:
  using Error::Error;
};

}  // namespace hpctrain::rt

#define HPCTRAIN_THROW(Type, message) throw Type((message), __FILE__, __LINE__)
