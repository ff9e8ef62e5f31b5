#include "h5.hpp"

#include <vector>

#include "error.hpp"

namespace hpctrain::data::h5 {

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {
herr_t collect(unsigned /*n*/, const H5E_error2_t* err, void* out) {
  auto* messages = static_cast<std::vector<std::string>*>(out);
  if (err->desc != nullptr && err->desc[0] != '\0') messages->emplace_back(err->desc);
  return 0;
}
}  // namespace

std::string error_text() {
  std::vector<std::string> messages;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &messages);
  H5Eclear2(H5E_DEFAULT);
  if (messages.empty()) return "";
  // The outermost message says what failed, the innermost why (e.g. "truncated file: eof = ...").
  if (messages.size() == 1) return messages.front();
  return messages.front() + " (" + messages.back() + ")";
}

Hid check(hid_t id, Hid::Closer closer, const std::string& what) {
  if (id < 0) {
    const std::string detail = error_text();
    throw DatasetFormatError(what + (detail.empty() ? "" : ": " + detail));
  }
  return Hid(id, closer);
}

void check(herr_t status, const std::string& what) {
  if (status < 0) {
    const std::string detail = error_text();
    throw DatasetFormatError(what + (detail.empty() ? "" : ": " + detail));
  }
}

}  // namespace hpctrain::data::h5
