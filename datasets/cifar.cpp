// CIFAR-10 binary -> hpctrain HDF5. Each record is 1 label byte then 1024 red, 1024 green and
// 1024 blue bytes (row-major 32x32 planes); we interleave them into HWC.
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "common/error.hpp"
#include "convert.hpp"
#include "convert_common.hpp"
#include "progress.hpp"

namespace hpctrain::datasets {

namespace {
constexpr int64_t kSide = 32;
constexpr int64_t kPlane = kSide * kSide;
constexpr int64_t kRecord = 1 + 3 * kPlane;
constexpr int64_t kClasses = 10;

std::vector<std::string> cifar_names(const std::string& first_file) {
  const auto slash = first_file.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : first_file.substr(0, slash);
  std::ifstream meta(dir + "/batches.meta.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(meta, line);) {
    if (!line.empty()) names.push_back(line);
  }
  if (static_cast<int64_t>(names.size()) == kClasses) return names;
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}
}  // namespace

ConvertSummary convert_cifar10(const std::vector<std::string>& batch_files,
                               const std::string& output, const ConvertOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (batch_files.empty()) HPCTRAIN_THROW(rt::DataError, "cifar10: no batch files given");
  int64_t n = 0;
  for (const auto& f : batch_files) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0)
      HPCTRAIN_THROW(rt::DataError, f + ": cannot open CIFAR-10 batch");
    if (st.st_size == 0 || st.st_size % kRecord != 0) {
      HPCTRAIN_THROW(rt::DataError, f + ": size " + std::to_string(st.st_size) +
                                        " is not a multiple of the " + std::to_string(kRecord) +
                                        "-byte CIFAR-10 record (truncated or not CIFAR-10)");
    }
    n += st.st_size / kRecord;
  }
  std::vector<std::string> names =
      options.class_names.empty() ? cifar_names(batch_files.front()) : options.class_names;
  if (static_cast<int64_t>(names.size()) != kClasses) {
    HPCTRAIN_THROW(rt::DataError,
                   "cifar10: " + std::to_string(names.size()) + " class names, expected 10");
  }
  DatasetWriter writer(output, n, kSide, kSide, /*channels=*/3, names, {options.chunk_images});
  Progress progress(options.progress, "cifar10", n);
  BlockWriter out(writer, 3 * kPlane, /*block_images=*/1000, progress);
  std::vector<uint8_t> record(kRecord);
  for (const auto& f : batch_files) {
    InputFile in(f);
    const int64_t records = [&] {
      struct stat st {};
      ::stat(f.c_str(), &st);
      return static_cast<int64_t>(st.st_size) / kRecord;
    }();
    for (int64_t r = 0; r < records; ++r) {
      in.read(record.data(), record.size(), "a record");
      const int64_t label = record[0];
      if (label >= kClasses) {
        HPCTRAIN_THROW(rt::DataError, f + ": record " + std::to_string(r) + " has label " +
                                          std::to_string(label) + ", outside [0, 10)");
      }
      uint8_t* dst = out.next_slot();
      for (int64_t p = 0; p < kPlane; ++p) {
        for (int64_t c = 0; c < 3; ++c) dst[p * 3 + c] = record[1 + c * kPlane + p];
      }
      out.add(label);
    }
  }
  out.flush();
  return finish_conversion(writer, output, out.labels(), t0);
}

}  // namespace hpctrain::datasets
