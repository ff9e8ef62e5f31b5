#include "convert_common.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <iomanip>
#include <ostream>

#include "common/error.hpp"

namespace hpctrain::datasets {

bool is_image_file(const std::filesystem::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* e : {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tga", ".ppm", ".pgm"}) {
    if (ext == e) return true;
  }
  return false;
}

InputFile::InputFile(const std::string& path) : path_(path) {
  errno = 0;
  file_ = gzopen(path.c_str(), "rb");
  if (file_ == nullptr) {
    HPCTRAIN_THROW(rt::DataError,
                   path + ": cannot open: " + (errno != 0 ? std::strerror(errno) : "zlib error"));
  }
  gzbuffer(file_, 1 << 20);
}

InputFile::~InputFile() {
  if (file_ != nullptr) gzclose(file_);
}

size_t InputFile::read_some(void* dst, size_t bytes) {
  size_t done = 0;
  auto* out = static_cast<char*>(dst);
  while (done < bytes) {
    const auto want = static_cast<unsigned>(std::min<size_t>(bytes - done, INT_MAX / 2));
    const int n = gzread(file_, out + done, want);
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(file_, &err);
      HPCTRAIN_THROW(rt::DataError,
                     path_ + ": read failed: " + (msg != nullptr ? msg : "zlib error"));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

void InputFile::read(void* dst, size_t bytes, const char* what) {
  const size_t got = read_some(dst, bytes);
  if (got != bytes) {
    HPCTRAIN_THROW(rt::DataError, path_ + ": file ends while reading " + what + " (" +
                                      std::to_string(got) + " of " + std::to_string(bytes) +
                                      " bytes; truncated file?)");
  }
}

BlockWriter::BlockWriter(DatasetWriter& writer, int64_t sample_bytes, int64_t block_images,
                         Progress& progress)
    : writer_(writer),
      sample_bytes_(sample_bytes),
      block_images_(block_images),
      progress_(progress),
      block_(static_cast<size_t>(sample_bytes * block_images)) {}

uint8_t* BlockWriter::next_slot() {
  return block_.data() + static_cast<int64_t>(block_labels_.size()) * sample_bytes_;
}

void BlockWriter::add(int64_t label) {
  block_labels_.push_back(label);
  labels_.push_back(label);
  if (static_cast<int64_t>(block_labels_.size()) == block_images_) flush();
}

void BlockWriter::flush() {
  if (block_labels_.empty()) return;
  const auto count = static_cast<int64_t>(block_labels_.size());
  writer_.write(written_, count, block_.data(), block_labels_.data());
  written_ += count;
  block_labels_.clear();
  progress_.update(written_);
}

std::vector<std::string> numbered_classes(int64_t n) {
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i) names.push_back(std::to_string(i));
  return names;
}

std::vector<int64_t> count_classes(const std::vector<int64_t>& labels, int64_t num_classes) {
  std::vector<int64_t> counts(static_cast<size_t>(num_classes), 0);
  for (int64_t l : labels) {
    if (l >= 0 && l < num_classes) ++counts[static_cast<size_t>(l)];
  }
  return counts;
}

ConvertSummary finish_conversion(DatasetWriter& writer, const std::string& output,
                                 const std::vector<int64_t>& labels,
                                 std::chrono::steady_clock::time_point started) {
  ConvertSummary s;
  s.output = output;
  s.info = writer.finish();
  s.class_counts = count_classes(labels, s.info.num_classes);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return s;
}

std::vector<std::string> fashion_mnist_classes() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

void print_summary(std::ostream& out, const ConvertSummary& s) {
  const auto& in = s.info;
  out << "wrote " << s.output << ": " << in.num_samples << " images " << in.height << "x"
      << in.width << "x" << in.channels << ", " << in.num_classes << " classes, chunk "
      << in.chunk_images << " images, " << std::fixed << std::setprecision(1) << s.seconds
      << " s\n";
  out << std::setprecision(4) << "  mean";
  for (double m : in.mean) out << " " << m;
  out << "  std";
  for (double d : in.std) out << " " << d;
  out << "\n  per class:";
  for (size_t c = 0; c < s.class_counts.size(); ++c) {
    out << " " << in.class_names[c] << "=" << s.class_counts[c];
  }
  out << "\n";
  out.unsetf(std::ios::floatfield);
}

}  // namespace hpctrain::datasets
