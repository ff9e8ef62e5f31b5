#include "tensorboard/event_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ostream>
#include <system_error>

#include "common/error.hpp"
#include "common/host.hpp"
#include "common/time.hpp"
#include "tensorboard/compat/proto/event.pb.h"
#include "tensorboard/record.hpp"

namespace hpctrain::tensorboard {
namespace {

constexpr std::string_view kEventFilePrefix = "events.out.tfevents.";

std::string serialize(const ::tensorboard::Event& event) {
  std::string bytes;
  if (!event.SerializeToString(&bytes)) {
    HPCTRAIN_THROW(rt::Error, "cannot serialize a TensorBoard event (step " +
                                  std::to_string(event.step()) + ")");
  }
  return bytes;
}

}  // namespace

bool is_event_file_name(const std::string& name) {
  // TensorBoard's io_wrapper.IsTensorFlowEventsFile: the name contains "tfevents".
  return name.find("tfevents") != std::string::npos;
}

EventFile read_event_file(const std::filesystem::path& path) {
  RecordFile records = read_record_file(path);
  EventFile file;
  file.damage = std::move(records.damage);
  for (size_t i = 0; i < records.records.size(); ++i) {
    ::tensorboard::Event event;
    if (!event.ParseFromString(records.records[i])) {
      file.damage = "record " + std::to_string(i) + " is not a TensorBoard event";
      break;
    }
    EventRecord r;
    r.wall_time = event.wall_time();
    r.step = event.step();
    if (event.has_file_version()) r.file_version = event.file_version();
    if (event.has_summary()) {
      for (const auto& value : event.summary().value()) {
        if (value.has_simple_value()) r.scalars.push_back({value.tag(), value.simple_value()});
      }
    }
    file.events.push_back(std::move(r));
  }
  return file;
}

std::map<std::string, int64_t> last_steps(const std::filesystem::path& dir, std::ostream& warn) {
  std::map<std::string, int64_t> last;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;  // a file gone meanwhile is not an event file of this run
    if (is_event_file_name(it->path().filename().string()) && it->is_regular_file(type_ec)) {
      files.push_back(it->path());
    }
  }
  if (ec) HPCTRAIN_THROW(rt::Error, "cannot list " + dir.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());  // TensorBoard's order; warnings come out stably
  for (const auto& path : files) {
    const EventFile file = read_event_file(path);
    if (!file.damage.empty()) {
      warn << rt::rank_prefix() << "tensorboard: " << path.string() << ": ignoring its tail, from "
           << file.damage << " (an attempt that died while writing, or a damaged file)"
           << std::endl;
    }
    for (const auto& event : file.events) {
      for (const auto& scalar : event.scalars) {
        const auto [it, inserted] = last.emplace(scalar.tag, event.step);
        if (!inserted) it->second = std::max(it->second, event.step);
      }
    }
  }
  return last;
}

EventWriter::EventWriter(const std::filesystem::path& dir, std::ostream& warn) : warn_(warn) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec && !std::filesystem::is_directory(dir, ec)) {
    HPCTRAIN_THROW(rt::Error, "cannot create " + dir.string() + ": it exists, not as a folder");
  }
  if (ec) HPCTRAIN_THROW(rt::Error, "cannot create " + dir.string() + ": " + ec.message());
  last_steps_ = last_steps(dir, warn);

  const double now = unix_time();
  const std::string name = std::string(kEventFilePrefix) +
                           std::to_string(static_cast<int64_t>(now)) + "." + host_name() + "." +
                           std::to_string(::getpid());
  // A new file, never an old one reopened: the same second and process id again (two writers in
  // one process) get a suffix, which sorts after the first.
  for (int n = 0; !fd_.valid(); ++n) {
    file_ = dir / (n == 0 ? name : name + "." + std::to_string(n));
    fd_.reset(::open(file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd_.valid() && (errno != EEXIST || n == 99)) {
      HPCTRAIN_THROW(rt::Error, "cannot create " + file_.string() + ": " + std::strerror(errno));
    }
  }
  ::tensorboard::Event event;
  event.set_wall_time(now);
  event.set_file_version(kFileVersion);
  if (!append(frame_record(serialize(event)))) {
    HPCTRAIN_THROW(rt::Error, "cannot write " + file_.string() + ": " + std::strerror(errno));
  }
}

size_t EventWriter::write(int64_t step, double wall_time, const std::vector<Scalar>& scalars) {
  if (failed_) return 0;
  ::tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  ::tensorboard::Summary& summary = *event.mutable_summary();
  std::vector<const Scalar*> written;
  for (const auto& scalar : scalars) {
    const auto it = last_steps_.find(scalar.tag);
    if (it != last_steps_.end() && it->second >= step) continue;
    ::tensorboard::Summary::Value& value = *summary.add_value();
    value.set_tag(scalar.tag);
    value.set_simple_value(static_cast<float>(scalar.value));
    written.push_back(&scalar);
  }
  if (written.empty()) return 0;
  if (!append(frame_record(serialize(event)))) {
    failed_ = true;
    warn_ << rt::rank_prefix() << "tensorboard: cannot write " << file_.string() << ": "
          << std::strerror(errno) << "; no more TensorBoard events this attempt (metrics.jsonl "
          << "has them all)" << std::endl;
    return 0;
  }
  for (const Scalar* scalar : written) last_steps_[scalar->tag] = step;
  return written.size();
}

bool EventWriter::append(const std::string& record) {
  // One write(2) of the whole frame: a live TensorBoard never reads half of it, and a crash
  // loses at most this record (the next attempt's scan ignores a torn tail). A short write
  // (a full disk) is continued, and fails if nothing more goes out.
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_.get(), record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace hpctrain::tensorboard
