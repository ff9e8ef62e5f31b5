// The hpctrain HDF5 image dataset layout, versions 1 (pixels) and 2 (encoded images)
// (docs/dataset-format.md), in one place for the writers (datasets/dataset_writer.hpp) and every
// reader: its names and limits, the summary of a dataset (DatasetInfo), and read_header(),
// read_labels() and read_encoded_index(), which check a file against it for every reader
// (ImageSource, hpctrain-data inspect).
// HDF5 handles appear only as the forward-declared h5::Hid, so this header, which the torch side
// includes, does not bring in hdf5.h; callers of the reading functions include data/h5.hpp.
// Thread safety: DatasetInfo and DatasetHeader are value types; the reading functions touch only
// the file they are given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpctrain::data {

namespace h5 {
class Hid;
}

inline constexpr char kFormatName[] = "hpctrain-images";
// Version 1 holds decoded pixels (/images), version 2 encoded images (/encoded, /offsets,
// /shapes); readers take both, one kind per dataset.
inline constexpr int64_t kFormatVersion = 1;
inline constexpr int64_t kFormatVersionEncoded = 2;
inline constexpr char kImagesName[] = "images";
inline constexpr char kLabelsName[] = "labels";
inline constexpr char kEncodedName[] = "encoded";
inline constexpr char kOffsetsName[] = "offsets";
inline constexpr char kShapesName[] = "shapes";
// Root attributes.
inline constexpr char kFormatAttr[] = "format";
inline constexpr char kFormatVersionAttr[] = "format_version";
inline constexpr char kNumClassesAttr[] = "num_classes";
inline constexpr char kClassNamesAttr[] = "class_names";
inline constexpr char kImageShapeAttr[] = "image_shape";
inline constexpr char kMeanAttr[] = "mean";
inline constexpr char kStdAttr[] = "std";
// Version 2: the encoding of every sample ("jpeg") and the program that wrote the file.
inline constexpr char kEncodingAttr[] = "encoding";
inline constexpr char kWriterAttr[] = "writer";
inline constexpr char kJpegEncoding[] = "jpeg";

// Limits a reader enforces before allocating anything sized by the file, so a damaged or hostile
// header cannot make a rank allocate terabytes.
inline constexpr int64_t kMaxSide = 16384;
inline constexpr int64_t kMaxChannels = 4;
inline constexpr int64_t kMaxClasses = 1 << 20;
inline constexpr int64_t kMaxSamples = int64_t{1} << 36;
// One encoded sample; a larger one is a damaged index (a 16384^2 RGB JPEG at q100 is ~200 MiB,
// no training set holds such).
inline constexpr int64_t kMaxEncodedSampleBytes = int64_t{64} << 20;

enum class Encoding { kRaw, kJpeg };

struct DatasetInfo {
  int64_t num_samples = 0;
  // kRaw: every image is height x width x channels. kJpeg (`encoding`): images differ in size;
  // height and width are the largest of any image's, channels that of every image.
  int64_t height = 0, width = 0, channels = 0;
  int64_t num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<double> mean, std;  // per channel, on the [0, 1] pixel scale
  int64_t chunk_images = 0;       // of the first file; informational
  Encoding encoding = Encoding::kRaw;

  int64_t sample_bytes() const { return height * width * channels; }
};

// One file's header as read_header() found it: the dataset it holds and how /images is stored,
// which is what a reader needs to choose how to read the pixels.
struct DatasetHeader {
  enum class Storage { kContiguous, kChunked, kOther };

  DatasetInfo info;  // one file's values; chunk_images is 0 unless /images is chunked
  Storage storage = Storage::kOther;
  bool filtered = false;            // /images has filters (compression): readable only by HDF5
  bool whole_image_chunks = false;  // chunks are [k, H, W, C], so no image spans two chunks
  uint64_t userblock = 0;           // HDF5 addresses count from the end of the user block
  uint64_t encoded_bytes = 0;       // version 2: the size of /encoded

  // The bytes the samples occupy in the file: pixels (version 1) or encoded images (version 2).
  uint64_t pixel_bytes() const {
    if (info.encoding != Encoding::kRaw) return encoded_bytes;
    return static_cast<uint64_t>(info.num_samples) * static_cast<uint64_t>(info.sample_bytes());
  }
};

// Checks an open file against the layout, in the order docs/dataset-format.md gives ("Validation
// order", from `format` up to the chunking of /images), before anything sized by the file is
// allocated; file_size (bytes on disk) bounds what unfiltered pixels may claim. Neither the labels'
// values nor the chunks' locations are read. Throws rt::DatasetFormatError "<path>: <what>",
// naming the HDF5 object.
DatasetHeader read_header(const h5::Hid& file, const std::string& path, uint64_t file_size);

// Reads /labels, header.info.num_samples entries, into dst and checks that each is a class of the
// header, [0, num_classes). The fletcher32 checksum is verified by HDF5 on the way. Throws
// rt::DatasetFormatError as read_header() does.
void read_labels(const h5::Hid& file, const DatasetHeader& header, const std::string& path,
                 int64_t* dst);

// Version 2: reads /offsets (num_samples + 1 entries into offsets) and checks that they start at
// 0, never decrease, give each sample 1 .. kMaxEncodedSampleBytes bytes and end at the size of
// /encoded; reads /shapes and checks each image's height and width against the limits and the
// largest against the header's. Throws rt::DatasetFormatError naming the sample.
void read_encoded_index(const h5::Hid& file, const DatasetHeader& header, const std::string& path,
                        uint64_t* offsets);

// A scalar string root attribute of the file at `path`, or "" when the file has none (or is not
// an HDF5 file). For the converter's bookkeeping attributes.
std::string read_string_attribute(const std::string& path, const char* name);

// Opens dataset /name; throws rt::DatasetFormatError "<path>: cannot open dataset /<name>".
h5::Hid open_dataset(const h5::Hid& file, const char* name, const std::string& path);

}  // namespace hpctrain::data
