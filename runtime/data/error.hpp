// Errors raised by the data library (hpctrain_data): one base class so callers can catch "the
// data pipeline failed" without knowing which part, and a subclass for input files that do not
// follow docs/dataset-format.md, so a tool can say "fix or regenerate the file" instead of
// "retry". Messages always name the file and, where one is involved, the HDF5 object.
// Thread safety: plain value types.
#pragma once

#include <stdexcept>

namespace hpctrain::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file is missing, unreadable, damaged, or does not follow the dataset format.
class DatasetFormatError : public DataError {
 public:
  using DataError::DataError;
};

}  // namespace hpctrain::data
