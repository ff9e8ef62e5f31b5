// `hpctrain-data inspect`: validates a file through the same reader the loader uses, so a file
// that passes inspect opens in training; optionally reads every image to find unreadable chunks.
#include <iomanip>
#include <ostream>

#include "common/error.hpp"
#include "convert.hpp"
#include "convert_common.hpp"
#include "data/jpeg.hpp"
#include "data/source.hpp"

namespace hpctrain::datasets {

void inspect(const std::string& path, bool read_all, bool file_locking, std::ostream& out) {
  data::SourceOptions opts;
  opts.file_locking = file_locking;
  const auto src = data::ImageSource::open({path}, opts);
  const auto& in = src->info();
  const auto& file = src->files().front();
  if (src->encoded()) {
    int64_t bytes = 0;
    std::vector<uint8_t> buf;
    std::vector<size_t> starts;
    for (int64_t s = 0; s < src->size(); ++s) bytes += static_cast<int64_t>(src->encoded_size(s));
    if (read_all) {
      // Every sample through the training decoder (at 1/8 scale: every coefficient is still
      // decoded, so damage anywhere shows).
      for (int64_t s = 0; s < src->size(); ++s) {
        src->read_encoded(&s, 1, buf, starts);
        try {
          const auto h = data::read_jpeg_header(buf.data(), buf.size());
          data::decode_region(buf.data(), buf.size(), {0, 0, h.height, h.width}, (h.height + 7) / 8,
                              (h.width + 7) / 8);
        } catch (const data::JpegError& e) {
          HPCTRAIN_THROW(rt::DataError, src->sample_name(s) + ": " + e.message());
        }
      }
    }
    out << path << ": OK, " << data::kFormatName << " v" << data::kFormatVersionEncoded << "\n"
        << "  images  " << in.num_samples << " JPEG, " << bytes / in.num_samples
        << " bytes each on average, largest " << in.height << "x" << in.width << ", " << in.channels
        << " channels, " << (file.direct ? "direct reads" : "read through HDF5")
        << (read_all ? ", every image decoded" : "") << "\n";
  } else if (read_all) {
    constexpr int64_t kBlock = 1024;
    std::vector<uint8_t> buf(static_cast<size_t>(kBlock * in.sample_bytes()));
    for (int64_t first = 0; first < src->size(); first += kBlock) {
      src->read(first, std::min(kBlock, src->size() - first), buf.data());
    }
  }
  const auto counts = count_classes(src->labels(), in.num_classes);
  if (!src->encoded()) {
    out << path << ": OK, " << data::kFormatName << " v" << data::kFormatVersion << "\n"
        << "  images  " << in.num_samples << " x " << in.height << "x" << in.width << "x"
        << in.channels << " uint8, "
        << (file.chunk_images > 0 ? "chunks of " + std::to_string(file.chunk_images) + " images"
                                  : std::string("contiguous"))
        << (file.direct ? ", direct reads" : ", read through HDF5 (filtered)")
        << (read_all ? ", every image read" : "") << "\n";
  }
  out << "  classes " << in.num_classes << ":";
  for (int64_t c = 0; c < in.num_classes && c < 20; ++c) {
    out << " " << in.class_names[static_cast<size_t>(c)] << "=" << counts[static_cast<size_t>(c)];
  }
  if (in.num_classes > 20) out << " ...";
  out << "\n" << std::setprecision(4) << "  mean";
  for (double m : in.mean) out << " " << m;
  out << "  std";
  for (double d : in.std) out << " " << d;
  out << "\n";
}

}  // namespace hpctrain::datasets
