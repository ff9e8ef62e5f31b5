#include "tensorboard/record.hpp"

#include <isa-l/crc.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace hpctrain::tensorboard {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;
constexpr size_t kLengthBytes = 8, kCrcBytes = 4;

void put_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_le(std::string_view bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) {
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return value;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  // ISA-L's crc32_iscsi takes the register's initial value and returns the register as it ends:
  // the standard CRC-32C starts from all ones and inverts the result (checked against the
  // check value of "123456789" in the unit tests).
  uint32_t crc = 0xffffffffu;
  // It takes an int length: feed larger buffers in pieces.
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const size_t n = std::min(kPiece, bytes.size() - at);
    crc = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data() + at)),
                      static_cast<int>(n), crc);
  }
  return ~crc;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string frame_record(std::string_view payload) {
  std::string out;
  out.reserve(kLengthBytes + 2 * kCrcBytes + payload.size());
  put_le(out, payload.size(), kLengthBytes);
  put_le(out, masked_crc32c(out), kCrcBytes);
  out.append(payload);
  put_le(out, masked_crc32c(payload), kCrcBytes);
  return out;
}

RecordFile parse_records(std::string_view bytes) {
  RecordFile file;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t left = bytes.size() - at;
    const auto torn = [&] {
      file.damage = "a torn record at byte " + std::to_string(at) + " (" + std::to_string(left) +
                    " bytes left)";
    };
    if (left < kLengthBytes + kCrcBytes) {
      torn();
      break;
    }
    const std::string_view header = bytes.substr(at, kLengthBytes);
    if (get_le(bytes.substr(at + kLengthBytes, kCrcBytes)) != masked_crc32c(header)) {
      file.damage = "a length checksum mismatch at byte " + std::to_string(at);
      break;
    }
    const uint64_t length = get_le(header);
    if (length > left - kLengthBytes - 2 * kCrcBytes || left < kLengthBytes + 2 * kCrcBytes) {
      torn();
      break;
    }
    const std::string_view data = bytes.substr(at + kLengthBytes + kCrcBytes, length);
    if (get_le(bytes.substr(at + kLengthBytes + kCrcBytes + length, kCrcBytes)) !=
        masked_crc32c(data)) {
      file.damage = "a data checksum mismatch in the record at byte " + std::to_string(at);
      break;
    }
    file.records.emplace_back(data);
    at += kLengthBytes + 2 * kCrcBytes + length;
    file.good_bytes = at;
  }
  return file;
}

RecordFile read_record_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (in) bytes << in.rdbuf();
  if (!in || in.bad()) {
    HPCTRAIN_THROW(rt::Error, "cannot read " + path.string() + ": " + std::strerror(errno));
  }
  return parse_records(bytes.str());
}

}  // namespace hpctrain::tensorboard
