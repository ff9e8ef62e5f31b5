// data/dataset_summary.hpp: one description of a dataset's files, the first file's shape and
// classes required of the others, the statistics weighted by sample count.
#include "data/dataset_summary.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"
#include "support/error_text.hpp"

namespace hpctrain::data {
namespace {

using test::bare_message_of;

DatasetInfo file_of(int64_t samples, int64_t side, double mean, double sd,
                    Encoding encoding = Encoding::kRaw) {
  DatasetInfo info;
  info.num_samples = samples;
  info.height = info.width = side;
  info.channels = 2;
  info.num_classes = 2;
  info.class_names = {"cat", "dog"};
  info.mean = {mean, 1 - mean};
  info.std = {sd, 2 * sd};
  info.chunk_images = samples;
  info.encoding = encoding;
  return info;
}

TEST(DatasetSummary, SamplesAddUpAndStatisticsWeighByThem) {
  DatasetSummary summary;
  summary.add(file_of(30, 8, 0.2, 0.1), "a.h5");
  summary.add(file_of(10, 8, 0.6, 0.3), "b.h5");
  const DatasetInfo info = summary.finish();
  EXPECT_EQ(info.num_samples, 40);
  EXPECT_EQ(info.height, 8);
  EXPECT_EQ(info.channels, 2);
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(info.chunk_images, 30) << "the first file's";
  ASSERT_EQ(info.mean.size(), 2u);
  EXPECT_DOUBLE_EQ(info.mean[0], (30 * 0.2 + 10 * 0.6) / 40);
  EXPECT_DOUBLE_EQ(info.mean[1], (30 * 0.8 + 10 * 0.4) / 40);
  EXPECT_DOUBLE_EQ(info.std[0], (30 * 0.1 + 10 * 0.3) / 40);
  EXPECT_DOUBLE_EQ(info.std[1], (30 * 0.2 + 10 * 0.6) / 40);
}

// Encoded images differ in size: the largest of each side.
TEST(DatasetSummary, EncodedFilesKeepTheLargestSides) {
  DatasetSummary summary;
  DatasetInfo a = file_of(5, 300, 0.5, 0.2, Encoding::kJpeg), b = a;
  b.height = 500;
  b.width = 200;
  summary.add(a, "a.h5");
  summary.add(b, "b.h5");
  const DatasetInfo info = summary.finish();
  EXPECT_EQ(info.height, 500);
  EXPECT_EQ(info.width, 300);
  EXPECT_EQ(info.encoding, Encoding::kJpeg);
}

TEST(DatasetSummary, AFileUnlikeTheFirstNamesBoth) {
  const auto mismatch = [](const DatasetInfo& second) {
    return bare_message_of<rt::DatasetFormatError>([&] {
      DatasetSummary summary;
      summary.add(file_of(5, 8, 0.5, 0.2), "a.h5");
      summary.add(second, "b.h5");
    });
  };
  EXPECT_EQ(mismatch(file_of(5, 8, 0.5, 0.2, Encoding::kJpeg)),
            "b.h5: holds encoded images (format version 2) but a.h5 does not (files of one "
            "dataset must match)");
  EXPECT_EQ(mismatch(file_of(5, 9, 0.5, 0.2)),
            "b.h5: images are 9x9x2 but a.h5 has 8x8x2 (files of one dataset must match)");
  DatasetInfo renamed = file_of(5, 8, 0.5, 0.2);
  renamed.class_names = {"cat", "emu"};
  EXPECT_EQ(mismatch(renamed),
            "b.h5: class names differ from a.h5 (files of one dataset must match)");
}

}  // namespace
}  // namespace hpctrain::data
