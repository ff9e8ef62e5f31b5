// TFRecord framing, the container of TensorBoard's event files (docs/tensorboard.md): each record
// is its length (uint64, little-endian), the masked CRC32C of those 8 bytes, the bytes, and the
// masked CRC32C of the bytes. CRC32C is ISA-L's crc32_iscsi; the mask is TensorFlow's (rotate
// right by 15, add 0xa282ead8), so a flipped bit in a run of zeros still changes the checksum.
// Thread safety: reentrant functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tensorboard {

// CRC-32C (Castagnoli, as iSCSI): crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// `payload` as one framed record, ready for one write(2).
std::string frame_record(std::string_view payload);

struct RecordFile {
  std::vector<std::string> records;  // every whole record whose checksums match, in order
  uint64_t good_bytes = 0;           // where the last of them ends
  // Empty when the file ends right after the last good record; otherwise why reading stopped
  // there ("a torn record at byte N (M bytes left)", "a length checksum mismatch at byte N", ...).
  std::string damage;
};

// Reads every record of `path`, stopping at the first torn or corrupt one (RecordFile::damage).
// Throws rt::Error naming the file if it cannot be read.
RecordFile read_record_file(const std::filesystem::path& path);

// The same on bytes already in memory.
RecordFile parse_records(std::string_view bytes);

}  // namespace hpctrain::tensorboard
