// A one-line text progress bar for the converters ("\r[#####     ] 50% 30000/60000 images").
// Thread safety: single-threaded.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace hpctrain::datasets {

class Progress {
 public:
  Progress(std::ostream* out, std::string label, int64_t total)
      : out_(out), label_(std::move(label)), total_(total) {}

  void update(int64_t done) {
    if (out_ == nullptr) return;
    const auto now = std::chrono::steady_clock::now();
    // Redrawing on every image would cost more than converting it on small images.
    if (done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
    *out_ << "\r" << label_ << " [" << std::string(filled, '#') << std::string(kWidth - filled, ' ')
          << "] " << (total_ > 0 ? 100 * done / total_ : 100) << "% " << done << "/" << total_
          << " images" << std::flush;
    if (done >= total_) *out_ << "\n";
  }

 private:
  std::ostream* out_;
  std::string label_;
  int64_t total_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace hpctrain::datasets
