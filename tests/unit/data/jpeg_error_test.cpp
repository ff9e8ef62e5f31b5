// data/jpeg_error.hpp, the one libjpeg error manager: the training decoder (data/jpeg.hpp) and the
// converter's codec (datasets/jpeg_codec.hpp) both turn libjpeg's errors, and its warnings about
// corrupt data, into a JpegError with libjpeg's own message, and print nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/jpeg.hpp"
#include "jpeg_codec.hpp"

namespace hpctrain::data {
namespace {

std::vector<uint8_t> small_jpeg() {
  const int64_t h = 48, w = 64;
  std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 37 % 251);
  return datasets::encode_jpeg_rgb(rgb.data(), h, w, 90);
}

// What each decoder throws for `bytes` ("" when it decodes them).
std::string training_error(const std::vector<uint8_t>& bytes) {
  try {
    const JpegHeader header = read_jpeg_header(bytes.data(), bytes.size());
    decode_region(bytes.data(), bytes.size(), {0, 0, header.height, header.width}, header.height,
                  header.width, /*allow_scaling=*/false);
  } catch (const JpegError& e) {
    return e.what();
  }
  return "";
}
std::string converter_error(const std::vector<uint8_t>& bytes) {
  try {
    datasets::decode_jpeg_rgb(bytes.data(), bytes.size());
  } catch (const JpegError& e) {
    return e.what();
  }
  return "";
}

TEST(Jpeg, BothDecodersReportLibjpegsErrorQuietly) {
  const std::vector<uint8_t> text = {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'e', 'g'};
  testing::internal::CaptureStderr();
  const std::string training = training_error(text), converter = converter_error(text);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(training.find("JPEG: Not a JPEG file: starts with 0x6e 0x6f"), std::string::npos)
      << training;
  EXPECT_NE(converter.find("JPEG: Not a JPEG file: starts with 0x6e 0x6f"), std::string::npos)
      << converter;
}

// A file cut short: libjpeg would fill the rest gray with a warning; both refuse it instead.
TEST(Jpeg, BothDecodersRefuseWhatLibjpegOnlyWarnsAbout) {
  const auto good = small_jpeg();
  EXPECT_EQ(training_error(good), "");
  EXPECT_EQ(converter_error(good), "");
  const std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(good.size() / 2));
  testing::internal::CaptureStderr();
  const std::string training = training_error(cut), converter = converter_error(cut);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(training.find("JPEG: Premature end of JPEG file"), std::string::npos) << training;
  EXPECT_NE(converter.find("JPEG: Premature end of JPEG file"), std::string::npos) << converter;
}

}  // namespace
}  // namespace hpctrain::data
