#include "data/dataset_summary.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace hpctrain::data {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  HPCTRAIN_THROW(rt::DatasetFormatError, path + ": " + what);
}

// The first file's description; statistics are combined at finish().
void start(DatasetInfo& summary, const DatasetInfo& info) {
  summary.encoding = info.encoding;
  summary.height = info.height;
  summary.width = info.width;
  summary.channels = info.channels;
  summary.num_classes = info.num_classes;
  summary.class_names = info.class_names;
  summary.chunk_images = info.chunk_images;
}

// A later file against the first (`first_path`): the same kind of samples, shape and classes.
void match(DatasetInfo& summary, const DatasetInfo& info, const std::string& path,
           const std::string& first_path) {
  const bool encoded = info.encoding != Encoding::kRaw;
  if (summary.encoding != info.encoding) {
    fail(path, std::string("holds ") +
                   (encoded ? "encoded images (format version 2)" : "pixels (format version 1)") +
                   " but " + first_path + " does not (files of one dataset must match)");
  }
  if (encoded) {
    summary.height = std::max(summary.height, info.height);
    summary.width = std::max(summary.width, info.width);
  }
  if ((!encoded && (summary.height != info.height || summary.width != info.width)) ||
      summary.channels != info.channels) {
    fail(path, "images are " + std::to_string(info.height) + "x" + std::to_string(info.width) +
                   "x" + std::to_string(info.channels) + " but " + first_path + " has " +
                   std::to_string(summary.height) + "x" + std::to_string(summary.width) + "x" +
                   std::to_string(summary.channels) + " (files of one dataset must match)");
  }
  if (summary.num_classes != info.num_classes || summary.class_names != info.class_names) {
    fail(path, "class names differ from " + first_path + " (files of one dataset must match)");
  }
}

}  // namespace

void DatasetSummary::add(const DatasetInfo& info, const std::string& path) {
  if (first_path_.empty()) {
    start(info_, info);
    first_path_ = path;
    mean_sum_.assign(static_cast<size_t>(info.channels), 0.0);
    std_sum_.assign(static_cast<size_t>(info.channels), 0.0);
  } else {
    match(info_, info, path, first_path_);
  }
  const auto n = static_cast<double>(info.num_samples);
  for (size_t c = 0; c < mean_sum_.size(); ++c) {
    mean_sum_[c] += info.mean[c] * n;
    std_sum_[c] += info.std[c] * n;
  }
  info_.num_samples += info.num_samples;
}

DatasetInfo DatasetSummary::finish() const {
  DatasetInfo out = info_;
  for (size_t c = 0; c < mean_sum_.size(); ++c) {
    out.mean.push_back(mean_sum_[c] / static_cast<double>(out.num_samples));
    out.std.push_back(std_sum_[c] / static_cast<double>(out.num_samples));
  }
  return out;
}

}  // namespace hpctrain::data
