// TFRecord framing: CRC-32C check values, the masked CRC and frames as the tensorboard package
// computes them, round trips, torn and corrupt records.
#include "tensorboard/record.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "common/error.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::tensorboard {
namespace {

std::string bytes_of(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

std::string random_bytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(Crc32c, CheckValues) {
  // The CRC catalogue's check value, and RFC 3720 (iSCSI) B.4's vectors.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  // The mask: rotate right by 15, add 0xa282ead8.
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST(Crc32c, FramingAgreesWithTheTensorboardPackage) {
  const std::filesystem::path python = HPCTRAIN_PYTHON;
  if (python.empty() || !std::filesystem::exists(python)) {
    GTEST_SKIP() << "no Python with the tensorboard package (HPCTRAIN_PYTHON)";
  }
  test::TempDir dir;
  std::mt19937 rng(20261123);
  std::vector<std::string> payloads = {"", "a", "123456789", std::string(4096, '\0')};
  for (size_t n : {3, 17, 255, 1000, 70000}) payloads.push_back(random_bytes(rng, n));
  std::string ours;
  for (size_t i = 0; i < payloads.size(); ++i) {
    std::ofstream(dir / ("payload." + std::to_string(i)), std::ios::binary) << payloads[i];
    ours += frame_record(payloads[i]);
  }
  // The package's masked_crc32c of each payload, and its RecordWriter's frames of them all.
  std::ofstream(dir / "check.py") << R"(import sys
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
from tensorboard.summary.writer.record_writer import RecordWriter
d, n = sys.argv[1], int(sys.argv[2])
payloads = [open(f"{d}/payload.{i}", "rb").read() for i in range(n)]
with open(f"{d}/crc.txt", "w") as out:
    for p in payloads:
        out.write(f"{masked_crc32c(p)}\n")
w = RecordWriter(open(f"{d}/frames.bin", "wb"))
for p in payloads:
    w.write(p)
w.close()
)";
  const std::string command = python.string() + " " + dir.file("check.py") + " " +
                              dir.path().string() + " " + std::to_string(payloads.size());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream crcs(dir / "crc.txt");
  for (const auto& p : payloads) {
    uint64_t theirs = 0;
    ASSERT_TRUE(crcs >> theirs);
    EXPECT_EQ(masked_crc32c(p), theirs) << "payload of " << p.size() << " bytes";
  }
  EXPECT_TRUE(slurp(dir / "frames.bin") == ours) << "frames differ from RecordWriter's";
}

TEST(Records, RoundTrip) {
  std::mt19937 rng(7);
  std::vector<std::string> payloads = {"", "x", random_bytes(rng, 1000), std::string(300, '\0')};
  std::string bytes;
  for (const auto& p : payloads) bytes += frame_record(p);
  ASSERT_EQ(frame_record("abc").size(), 8 + 4 + 3 + 4u);
  EXPECT_EQ(frame_record("abc").substr(0, 8), bytes_of({3, 0, 0, 0, 0, 0, 0, 0}));
  const RecordFile file = parse_records(bytes);
  EXPECT_EQ(file.records, payloads);
  EXPECT_EQ(file.good_bytes, bytes.size());
  EXPECT_EQ(file.damage, "");
  EXPECT_TRUE(parse_records("").records.empty());

  test::TempDir dir;
  std::ofstream(dir / "f", std::ios::binary) << bytes;
  EXPECT_EQ(read_record_file(dir / "f").records, payloads);
  EXPECT_THROW(read_record_file(dir / "missing"), rt::Error);
}

TEST(Records, TornTailKeepsEveryWholeRecord) {
  const std::string first = frame_record("first record");
  const std::string last = frame_record("the last one, cut short");
  // Every cut inside the last record: the first survives, the rest is reported as torn.
  for (size_t cut = 1; cut < last.size(); ++cut) {
    const RecordFile file = parse_records(first + last.substr(0, cut));
    ASSERT_EQ(file.records.size(), 1u) << "cut at " << cut;
    EXPECT_EQ(file.records[0], "first record");
    EXPECT_EQ(file.good_bytes, first.size());
    EXPECT_NE(file.damage.find("torn record at byte " + std::to_string(first.size())),
              std::string::npos)
        << "cut at " << cut << ": " << file.damage;
  }
}

TEST(Records, CorruptChecksumStopsThere) {
  const std::string a = frame_record("a"), b = frame_record("bbbb"), c = frame_record("c");
  // A flipped bit in b's data: its data checksum fails; c, after it, is not trusted either.
  std::string bytes = a + b + c;
  bytes[a.size() + 12 + 2] ^= 0x10;
  RecordFile file = parse_records(bytes);
  EXPECT_EQ(file.records, std::vector<std::string>{"a"});
  EXPECT_NE(
      file.damage.find("data checksum mismatch in the record at byte " + std::to_string(a.size())),
      std::string::npos)
      << file.damage;
  // A flipped bit in b's length.
  bytes = a + b + c;
  bytes[a.size()] ^= 0x01;
  file = parse_records(bytes);
  EXPECT_EQ(file.records, std::vector<std::string>{"a"});
  EXPECT_NE(file.damage.find("length checksum mismatch at byte " + std::to_string(a.size())),
            std::string::npos)
      << file.damage;
  // A flipped bit in b's data checksum itself.
  bytes = a + b + c;
  bytes[a.size() + b.size() - 1] ^= 0x80;
  EXPECT_EQ(parse_records(bytes).records, std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace hpctrain::tensorboard
