#include <gtest/gtest.h>

#include <unistd.h>
#include <cstring>

#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "common/error.hpp"
#include "dist/ports.hpp"

namespace hpctrain::dist {
namespace {

std::string write_temp(const std::string& text) {
  char path[] = "/tmp/hpctrain-ports-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << text;
  return path;
}

TEST(Ports, ReadsTheKernelRange) {
  const auto [lo, hi] = ephemeral_port_range();
  EXPECT_GE(lo, 1);
  EXPECT_LE(lo, hi);
  EXPECT_LE(hi, 65535);
  const std::string path = write_temp("32768\t60999\n");
  EXPECT_EQ(ephemeral_port_range(path), std::make_pair(32768, 60999));
  std::remove(path.c_str());
}

TEST(Ports, BadRangeFileNamesTheFile) {
  for (const char* text :
       {"", "32768", "abc 60999", "32768 60999 7", "60999 32768", "0 100", "1 70000"}) {
    const std::string path = write_temp(text);
    try {
      ephemeral_port_range(path);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const rt::Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  }
  try {
    ephemeral_port_range("/nonexistent/ip_local_port_range");
    ADD_FAILURE() << "read a missing file";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ip_local_port_range"), std::string::npos);
  }
}

TEST(Ports, DerivedPortIsStable) {
  const std::pair<int, int> range{32768, 60999};
  EXPECT_EQ(derive_port("1234", "0", range), derive_port("1234", "0", range));
  // Pinned (FNV-1a 64 of "1234/0", computed independently): every rank, built by any compiler
  // on any host, must compute the same port.
  EXPECT_EQ(derive_port("1234", "0", range), 10122);
  EXPECT_NE(derive_port("1234", "0", range), derive_port("1234", "1", range));
  EXPECT_NE(derive_port("1234", "0", range), derive_port("1235", "0", range));
}

TEST(Ports, NeverInsideTheEphemeralRange) {
  const std::pair<int, int> ranges[] = {{32768, 60999}, {1024, 65535 - 1}, {10000, 65534},
                                        {10001, 65535}, {1, 9999},         {1, 10000},
                                        {65535, 65535}, {10000, 10000},    {20000, 20001},
                                        {40000, 65535}, {1024, 4999},      {65000, 65535 - 10}};
  for (const auto& range : ranges) {
    for (int job = 0; job < 2000; ++job) {
      const int port = derive_port(std::to_string(job), "0", range);
      ASSERT_GE(port, 10000) << range.first << "-" << range.second;
      ASSERT_LE(port, 65535) << range.first << "-" << range.second;
      ASSERT_FALSE(port >= range.first && port <= range.second)
          << port << " inside " << range.first << "-" << range.second;
    }
  }
  // Only one allowed port left: 10000.
  EXPECT_EQ(derive_port("7", "0", {10001, 65535}), 10000);
  EXPECT_EQ(derive_port("7", "0", {10000, 65534}), 65535);
}

TEST(Ports, EmptyAllowedSetThrows) {
  EXPECT_THROW(derive_port("1", "0", {10000, 65535}), rt::Error);
  EXPECT_THROW(derive_port("1", "0", {1, 65535}), rt::Error);
  EXPECT_THROW(derive_port("1", "0", {60999, 32768}), rt::Error);
}

TEST(Ports, SpreadsOverJobIds) {
  const std::pair<int, int> range{32768, 60999};
  std::set<int> ports;
  int low = 0;  // below the ephemeral range
  const int jobs = 5000;
  for (int job = 0; job < jobs; ++job) {
    const int port = derive_port(std::to_string(1000000 + job), "0", range);
    ports.insert(port);
    if (port < 32768) ++low;
  }
  // 27304 allowed ports: 5000 uniform draws give ~4560 distinct.
  EXPECT_GT(ports.size(), 4300u);
  // 22768 of the 27304 allowed ports lie below the range: expect ~83.4% of draws there.
  EXPECT_NEAR(static_cast<double>(low) / jobs, 22768.0 / 27304.0, 0.03);
}

TEST(Ports, BindsPortZero) {
  const auto [fd, port] = bind_listen_socket(0);
  EXPECT_GE(fd, 0);
  EXPECT_GT(port, 0);
  close(fd);
}

TEST(Ports, TakenPortIsAnErrorNamingIt) {
  const auto [fd, port] = bind_listen_socket(0);
  try {
    const auto second = bind_listen_socket(port);
    close(second.first);
    ADD_FAILURE() << "bound port " << port << " twice";
  } catch (const rt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::strerror(EADDRINUSE)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("port " + std::to_string(port)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("taken"), std::string::npos) << e.what();
  }
  close(fd);
  // Once closed it can be bound again (SO_REUSEADDR).
  const auto again = bind_listen_socket(port);
  EXPECT_EQ(again.second, port);
  close(again.first);
}

}  // namespace
}  // namespace hpctrain::dist
