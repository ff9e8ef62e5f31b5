// TensorBoard event files (docs/tensorboard.md): the worker's rank 0 writes the scalars of
// metrics.jsonl to RUN_DIR/tensorboard/, one new file per attempt, and reads what earlier
// attempts wrote so that a resumed run does not write a (tag, step) twice.
// The records are protobuf `tensorboard.Event`s (third_party/tensorboard/proto) in TFRecord frames
// (record.hpp); this header hides the protobuf types.
// Thread safety: an EventWriter is used by one thread; the free functions are reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace hpctrain::tensorboard {

// The version string of the first record of every event file (what TensorBoard checks for).
inline constexpr const char* kFileVersion = "brain.Event:2";

struct Scalar {
  std::string tag;
  double value = 0;  // stored as float32 (Summary.Value.simple_value), as TensorBoard reads it
};

// One Event as this library writes it: a file version or a summary of scalars.
struct EventRecord {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;     // set in a file's first event only
  std::vector<Scalar> scalars;  // simple_value entries of the event's summary
};

struct EventFile {
  std::vector<EventRecord> events;  // every whole, checksummed, parseable event, in order
  std::string damage;               // empty, or why reading stopped early (RecordFile::damage)
};

// True for names TensorBoard reads as event files ("events.out.tfevents." and more).
bool is_event_file_name(const std::string& name);

// Reads the events of `path` up to the first torn, corrupt or unparseable record.
// Throws rt::Error naming the file if it cannot be read.
EventFile read_event_file(const std::filesystem::path& path);

// The highest step of each scalar tag in the event files of `dir` (none: an empty map). A file
// with a damaged tail counts up to it, with a warning naming the file on `warn`.
// Throws rt::Error naming `dir` or a file that cannot be read.
std::map<std::string, int64_t> last_steps(const std::filesystem::path& dir, std::ostream& warn);

class EventWriter {
 public:
  // Creates `dir` if needed, scans the event files already there (last_steps), and starts a new
  // file, events.out.tfevents.<unix time>.<host>.<pid>, with the file-version event.
  // Throws rt::Error naming the path that cannot be created, read or written.
  EventWriter(const std::filesystem::path& dir, std::ostream& warn);

  // Appends one event holding `scalars` at `step`, leaving out every tag that an earlier
  // attempt (or this one) already wrote at `step` or later; nothing when none is left. Each
  // event goes out in one write(2). Returns how many values were written.
  // A write error does not throw: the event files are a view of metrics.jsonl, not worth a
  // training run. It warns once, naming the file, and the writer writes nothing more (a record
  // after a torn one would be unreadable anyway).
  size_t write(int64_t step, double wall_time, const std::vector<Scalar>& scalars);

  const std::filesystem::path& file() const { return file_; }
  // Whether a write failed (nothing more is written).
  bool failed() const { return failed_; }

 private:
  bool append(const std::string& record);

  std::filesystem::path file_;
  std::ostream& warn_;
  UniqueFd fd_;
  std::map<std::string, int64_t> last_steps_;
  bool failed_ = false;
};

}  // namespace hpctrain::tensorboard
