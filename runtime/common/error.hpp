// hpctrain's errors: one small hierarchy under hpctrain::Error, the only one of the project's
// classes that derives from std::runtime_error. The runtime's (rt::Error and below, for every
// library of the runtime: common, dist, data, model, train, checkpoint, preempt) prefix each
// message with where it happened, "[rank 3/16 node017] file.cpp:42: ", as nccl-tests does, so one
// line of a 512-rank log is enough to act on. The rank prefix comes from a process-wide context
// set once the rank is known ("[node017] " before that). The others carry their message as given:
// their callers (the launcher's commands) say where. Absence is a value (std::optional), never an
// error.
//
//   hpctrain::Error           the root; what() is the message
//   ├─ rt::Error              anything the runtime reports (exit status 1 in the worker)
//   │  ├─ EnvError            the launch environment is wrong: a variable missing, malformed or
//   │  │                      inconsistent, or a directory the run writes is not safely its own
//   │  │                      (the checkpoints': exit status 2, a retry will not help)
//   │  ├─ PeerError           a peer is gone or never arrived (rendezvous, collectives)
//   │  ├─ LibraryError        a C library (PMIx, Gloo, NCCL, CUDA, HDF5) failed; carries its text
//   │  ├─ DataError           the data pipeline failed
//   │  │  └─ DatasetFormatError  an input file is missing, damaged or not in the dataset format
//   │  │                         (exit status 2: fix or regenerate the file, a retry will not help)
//   │  └─ DivergedError       the loss diverged (train/divergence.hpp), on every rank at the same
//   │                         step (exit status 79: a retry would diverge again)
//   ├─ common::FileError      a durable write failed (common/durable_file.hpp)
//   ├─ ExitWith               end the program with a status (common/exit_codes.hpp)
//   ├─ run::RunDirError       the launcher: a run directory problem (launcher/run/run_dir.hpp)
//   └─ slurm::SlurmError      the launcher: a Slurm command failed (launcher/slurm/client.hpp)
// Thread safety: set_rank_context() is called once, before other threads start; reads are safe.
#pragma once

#include <stdexcept>
#include <string>

namespace hpctrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace hpctrain

namespace hpctrain::rt {

// Sets the "[rank r/N host]" prefix of every later error.
void set_rank_context(int rank, int world_size, const std::string& host);
// "[rank r/N host] " or "[host] " before the rank is known.
std::string rank_prefix();

class Error : public hpctrain::Error {
 public:
  Error(const std::string& message, const char* file, int line);
  // The message without the "[rank r/N host] file:line: " prefix, for wrapping in another error.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

class EnvError : public Error {
 public:
  using Error::Error;
};

class PeerError : public Error {
 public:
  using Error::Error;
};

class LibraryError : public Error {
 public:
  using Error::Error;
};

class DataError : public Error {
 public:
  using Error::Error;
};

class DatasetFormatError : public DataError {
 public:
  using DataError::DataError;
};

class DivergedError : public Error {
 public:
  using Error::Error;
};

}  // namespace hpctrain::rt

// Throws Type (an rt::Error) with the message and the throwing file and line.
#define HPCTRAIN_THROW(Type, message) throw Type((message), __FILE__, __LINE__)
