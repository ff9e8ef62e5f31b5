// Thin RAII and error helpers over the HDF5 C API, shared by the reader and the writer.
//
// HDF5 reports errors on a per-thread error stack and, by default, prints it to stderr. We turn
// the printing off (per thread: the thread-safe build keeps that setting per thread) and fold the
// stack into the exception message instead, so a failing rank prints one actionable line.
// Thread safety: Hid is a move-only owner; HDF5 itself serialises calls in its thread-safe build.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>

namespace hpctrain::data::h5 {

// Turns off HDF5's automatic error printing for the calling thread. Cheap; call before any HDF5
// call on a new thread.
void quiet();

// The innermost and outermost messages of the calling thread's HDF5 error stack, or "" when the
// stack is empty. Clears the stack.
std::string error_text();

// Owns one hid_t and closes it with the matching H5*close function.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Hid& operator=(Hid&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
      closer_ = other.closer_;
    }
    return *this;
  }
  ~Hid() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

// Throws rt::DatasetFormatError("<what>: <hdf5 error text>") when id < 0; otherwise owns it.
Hid check(hid_t id, Hid::Closer closer, const std::string& what);
// Throws rt::DatasetFormatError when status < 0.
void check(herr_t status, const std::string& what);

// Rows [first, first + count) of `dataset` (all of every other dimension) to or from the
// contiguous buffer of memory type `type`. Throws rt::DatasetFormatError "<what>: <hdf5 error>".
void read_rows(hid_t dataset, hid_t type, int64_t first, int64_t count, void* dst,
               const std::string& what);
void write_rows(hid_t dataset, hid_t type, int64_t first, int64_t count, const void* src,
                const std::string& what);

}  // namespace hpctrain::data::h5
