#include "common/time.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace hpctrain {
namespace {

TEST(Time, UtcStampsReadBackToTheirUnixTime) {
  EXPECT_EQ(utc_ms(1795915802412), "2026-11-29T01:30:02.412Z");
  EXPECT_EQ(utc_ms(1795915802007), "2026-11-29T01:30:02.007Z");
  ASSERT_TRUE(parse_utc("2026-11-29T01:30:02Z"));
  EXPECT_EQ(*parse_utc("2026-11-29T01:30:02Z"), 1795915802.0);
  EXPECT_NEAR(*parse_utc(utc_ms(1795915802412)), 1795915802.412, 1e-6);
  EXPECT_NEAR(*parse_utc("2026-11-29T01:30:02.5Z"), 1795915802.5, 1e-9);
  const std::string now = utc_now();
  ASSERT_TRUE(parse_utc(now)) << now;
  EXPECT_LE(std::fabs(*parse_utc(now) - unix_time()), 2.0);
  EXPECT_LE(std::llabs(unix_time_ms() - static_cast<int64_t>(unix_time() * 1000)), 2000);
}

TEST(Time, ParseUtcRefusesOtherForms) {
  for (const char* bad : {"", "2026-11-28", "2026-11-29T01:30:02", "2026-11-29T01:30:02+01:00",
                          "2026-11-29T01:30:02.Z", "2026-11-29T01:30:02.4", "2026-11-28 00:10:02Z",
                          "2026-11-29T01:30:02Zx", "x2026-11-29T01:30:02Z"}) {
    EXPECT_FALSE(parse_utc(bad)) << bad;
  }
}

// Tenths truncated, a whole number without ".0".
TEST(Time, SecondsTextToTheTenth) {
  using std::chrono::milliseconds;
  EXPECT_EQ(seconds_text(milliseconds(0)), "0 s");
  EXPECT_EQ(seconds_text(milliseconds(99)), "0 s");
  EXPECT_EQ(seconds_text(milliseconds(5000)), "5 s");
  EXPECT_EQ(seconds_text(milliseconds(5299)), "5.2 s");
  EXPECT_EQ(seconds_text(milliseconds(61050)), "61 s");
  EXPECT_EQ(seconds_text(milliseconds(10200)), "10.2 s");
}

}  // namespace
}  // namespace hpctrain
