#include "data/h5.hpp"

#include <vector>

#include "common/error.hpp"

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
    HPCTRAIN_THROW(rt::DatasetFormatError, what + (detail.empty() ? "" : ": " + detail));
  }
  return Hid(id, closer);
}

void check(herr_t status, const std::string& what) {
  if (status < 0) {
    const std::string detail = error_text();
    HPCTRAIN_THROW(rt::DatasetFormatError, what + (detail.empty() ? "" : ": " + detail));
  }
}

namespace {

void transfer_rows(hid_t dataset, hid_t type, int64_t first, int64_t count, void* buffer,
                   bool write, const std::string& what) {
  Hid file_space = check(H5Dget_space(dataset), H5Sclose, what);
  const int rank = H5Sget_simple_extent_ndims(file_space.get());
  check(rank, what);
  std::vector<hsize_t> extent(static_cast<size_t>(rank));
  check(H5Sget_simple_extent_dims(file_space.get(), extent.data(), nullptr), what);
  std::vector<hsize_t> start(extent.size(), 0);
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(),
                            nullptr),
        what);
  Hid memory_space = check(H5Screate_simple(rank, extent.data(), nullptr), H5Sclose, what);
  check(write ? H5Dwrite(dataset, type, memory_space.get(), file_space.get(), H5P_DEFAULT, buffer)
              : H5Dread(dataset, type, memory_space.get(), file_space.get(), H5P_DEFAULT, buffer),
        what);
}

}  // namespace

void read_rows(hid_t dataset, hid_t type, int64_t first, int64_t count, void* dst,
               const std::string& what) {
  transfer_rows(dataset, type, first, count, dst, /*write=*/false, what);
}

void write_rows(hid_t dataset, hid_t type, int64_t first, int64_t count, const void* src,
                const std::string& what) {
  // H5Dwrite takes const void*; one implementation serves both directions.
  transfer_rows(dataset, type, first, count, const_cast<void*>(src), /*write=*/true, what);
}

}  // namespace hpctrain::data::h5
