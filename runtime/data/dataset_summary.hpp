// One description (DatasetInfo) of a dataset made of several files, from each file's: the first
// file sets the shape, the classes and the encoding, and every other must match it (encoded
// images may differ in size: the summary keeps the largest); the per-channel statistics combine
// weighted by each file's sample count. ImageSource::open() adds its files here as it opens them.
// Thread safety: a value type.
#pragma once

#include <string>
#include <vector>

#include "data/format.hpp"

namespace hpctrain::data {

class DatasetSummary {
 public:
  // Adds one file's description. Throws rt::DatasetFormatError "<path>: ..." naming the first
  // file when this one does not match it.
  void add(const DatasetInfo& info, const std::string& path);
  // The dataset: the samples of every file added, mean and std per channel the sample-weighted
  // mean of the files' (for std an approximation, close enough for normalisation).
  DatasetInfo finish() const;

 private:
  DatasetInfo info_;
  std::string first_path_;  // "" until a file is added
  std::vector<double> mean_sum_, std_sum_;
};

}  // namespace hpctrain::data
