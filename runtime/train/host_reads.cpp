#include "train/host_reads.hpp"

#include <ATen/record_function.h>

#include <array>
#include <string_view>

#include "common/error.hpp"

namespace hpctrain::train {
namespace {

// Operators whose result is a tensor's value on the host, or whose output size depends on one
// (which makes a GPU wait).
constexpr std::array<std::string_view, 14> kHostReads = {"aten::item",
                                                         "aten::_local_scalar_dense",
                                                         "aten::is_nonzero",
                                                         "aten::equal",
                                                         "aten::allclose",
                                                         "aten::nonzero",
                                                         "aten::masked_select",
                                                         "aten::_unique",
                                                         "aten::_unique2",
                                                         "aten::unique_dim",
                                                         "aten::unique_consecutive",
                                                         "aten::bincount",
                                                         "aten::repeat_interleave",
                                                         "aten::tolist"};

struct Watch {
  int depth = 0;      // operators open on this thread
  int guards = 0;     // guards alive on this thread
  std::string first;  // the first host read
};
thread_local Watch watch;

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction& fn) {
  if (watch.depth == 0 && watch.first.empty()) {
    const std::string_view name = fn.name();
    for (const auto read : kHostReads) {
      if (name == read) {
        watch.first = name;
        break;
      }
    }
  }
  ++watch.depth;
  return nullptr;
}

void on_exit(const at::RecordFunction& /*fn*/, at::ObserverContext* /*ctx*/) { --watch.depth; }

}  // namespace

HostReadGuard::HostReadGuard() {
  if (watch.guards++ == 0) {
    watch.first.clear();
    watch.depth = 0;
  }
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_enter, &on_exit)
          .needsInputs(false)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
}

HostReadGuard::~HostReadGuard() {
  at::removeCallback(handle_);
  --watch.guards;
}

std::string HostReadGuard::first_read() const { return watch.first; }

void HostReadGuard::check(const std::string& where) const {
  if (watch.first.empty()) return;
  HPCTRAIN_THROW(rt::Error, where + " read a tensor's value on the host (" + watch.first +
                                "): the static step must not wait for the device (a CUDA graph "
                                "cannot hold that read)");
}

}  // namespace hpctrain::train
