// hpctrain-data folder --jpeg: an image folder (root/class/*, or ImageNet's flat validation folder
// with its label file) into format version 2, encoded JPEG samples (docs/dataset-format.md).
//
// Sharding and resume: the sorted inputs are cut into shards of consecutive files; each shard is
// converted by every thread at once (images claimed one by one), written to NAME.partial and
// renamed when complete and synced. A finished shard carries the conversion's plan (a digest of
// the input list, the file sizes and the options) and is kept by a later run with the same plan,
// so a killed conversion resumes at the first unfinished shard. The same input gives the same
// files, byte for byte, whatever the thread count.
// What is stored: a 3-component JPEG within --max-side keeps its bytes (after a full decode at
// 1/8 scale by the training decoder proves it reads); any other image is decoded, resized to
// --max-side and encoded at --quality. A file that does not decode is skipped and reported.
#include <fcntl.h>
#include <stb_image.h>
#include <stb_image_resize.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <thread>

#include "common/durable_file.hpp"
#include "common/error.hpp"
#include "convert.hpp"
#include "convert_common.hpp"
#include "data/format.hpp"
#include "data/jpeg.hpp"
#include "dataset_writer.hpp"
#include "jpeg_codec.hpp"
#include "version.hpp"

namespace hpctrain::datasets {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kDefaultShardSize = 10000;

struct Input {
  std::string path;
  int64_t label = 0;
  uint64_t size = 0;
};

// One converted image, or why it was skipped.
struct Item {
  std::vector<uint8_t> bytes;
  int64_t height = 0, width = 0;
  PixelStats stats;
  bool as_is = false;
  std::string error;
};

[[noreturn]] void bad(const std::string& what) { HPCTRAIN_THROW(rt::DataError, what); }

// The whole file, with read(2) into a buffer of its size (a stream iterator reads byte by byte).
std::vector<uint8_t> read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  std::vector<uint8_t> bytes;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  for (;;) {
    if (got == bytes.size()) bytes.resize(std::max<size_t>(4096, bytes.size() * 2));
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      if (n < 0) throw std::runtime_error(std::string("read failed: ") + std::strerror(err));
      break;
    }
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

// Resizes so the longer side is at most max_side (0: kept), then encodes.
void encode_rgb(Item& item, const uint8_t* rgb, int64_t h, int64_t w, int64_t max_side,
                int quality) {
  std::vector<uint8_t> resized;
  if (max_side > 0 && std::max(h, w) > max_side) {
    const double s = static_cast<double>(max_side) / static_cast<double>(std::max(h, w));
    const int64_t nh = std::max<int64_t>(1, std::llround(static_cast<double>(h) * s));
    const int64_t nw = std::max<int64_t>(1, std::llround(static_cast<double>(w) * s));
    resized.resize(static_cast<size_t>(nh * nw * 3));
    if (stbir_resize_uint8(rgb, static_cast<int>(w), static_cast<int>(h), 0, resized.data(),
                           static_cast<int>(nw), static_cast<int>(nh), 0, 3) == 0) {
      throw std::runtime_error("resize failed");
    }
    rgb = resized.data();
    h = nh;
    w = nw;
  }
  item.stats.add(rgb, h * w, 3, /*stride=*/16);
  item.bytes = encode_jpeg_rgb(rgb, h, w, quality);
  item.height = h;
  item.width = w;
}

struct StbiFree {
  void operator()(unsigned char* p) const { stbi_image_free(p); }
};

Item convert_one(const std::string& path, int64_t max_side, int quality) {
  Item item;
  try {
    std::vector<uint8_t> data = read_whole(path);
    const bool jpeg = data.size() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF;
    if (jpeg) {
      bool keep = false;
      data::JpegHeader header;
      try {
        header = data::read_jpeg_header(data.data(), data.size());
        keep = header.channels == 3 &&
               (max_side == 0 || std::max(header.height, header.width) <= max_side);
      } catch (const data::JpegError&) {
        keep = false;  // 4 components (CMYK): decoded below
      }
      if (keep) {
        // The whole image through the training decoder at 1/8 scale: every coefficient is
        // entropy-decoded, so damage anywhere shows, at a fraction of a full decode's cost.
        const data::DecodedRegion r =
            data::decode_region(data.data(), data.size(), {0, 0, header.height, header.width},
                                (header.height + 7) / 8, (header.width + 7) / 8);
        item.stats.add(r.pixels.data(), r.rows * r.cols, r.channels);
        item.height = header.height;
        item.width = header.width;
        item.bytes = std::move(data);
        item.as_is = true;
        return item;
      }
      const RgbImage rgb = decode_jpeg_rgb(data.data(), data.size());
      encode_rgb(item, rgb.pixels.data(), rgb.height, rgb.width, max_side, quality);
      return item;
    }
    int w = 0, h = 0, comp = 0;
    if (stbi_info_from_memory(data.data(), static_cast<int>(data.size()), &w, &h, &comp) == 0) {
      throw std::runtime_error(std::string("not an image stb_image reads: ") +
                               stbi_failure_reason());
    }
    if (w < 1 || h < 1 || w > data::kMaxSide || h > data::kMaxSide) {
      throw std::runtime_error("image size " + std::to_string(w) + "x" + std::to_string(h) +
                               " outside 1.." + std::to_string(data::kMaxSide));
    }
    std::unique_ptr<unsigned char, StbiFree> pixels(
        stbi_load_from_memory(data.data(), static_cast<int>(data.size()), &w, &h, &comp, 3));
    if (!pixels) throw std::runtime_error(std::string("cannot decode: ") + stbi_failure_reason());
    encode_rgb(item, pixels.get(), h, w, max_side, quality);
  } catch (const rt::Error& e) {
    item = Item{};
    item.error = e.message();  // without the "[host] file:line:" prefix of what()
  } catch (const std::exception& e) {
    item = Item{};
    item.error = e.what();
  }
  return item;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> sorted_subfolders(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) bad(root + ": not a directory");
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root)) {
    if (e.is_directory()) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> sorted_images(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && is_image_file(e.path())) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The flat validation folder: every image named in the label file, in file-name order.
std::vector<Input> list_flat(const JpegFolderOptions& o, std::vector<std::string>& classes) {
  if (!o.class_names.empty()) {
    classes = o.class_names;
  } else if (!o.classes_from.empty()) {
    classes = sorted_subfolders(o.classes_from);
  } else {
    bad("--val-labels needs the class list: --classes-from TRAIN_ROOT or --class-names");
  }
  if (classes.empty()) bad("no classes (--classes-from " + o.classes_from + " has no subfolders)");
  std::map<std::string, int64_t> class_index;
  for (size_t i = 0; i < classes.size(); ++i) class_index[classes[i]] = static_cast<int64_t>(i);
  std::ifstream in(o.val_labels);
  if (!in) bad(o.val_labels + ": cannot open the label file");
  std::map<std::string, int64_t> label_of;  // file stem -> class
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 BOM
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream words(line);
    std::string file, cls;
    if (!(words >> file)) continue;
    if (line_no == 1 && lower(file) == "imageid") continue;
    if (!(words >> cls)) {
      bad(o.val_labels + ": line " + std::to_string(line_no) + " has a file but no class");
    }
    auto it = class_index.find(cls);
    if (it == class_index.end()) {
      bad(o.val_labels + ": line " + std::to_string(line_no) + ": class '" + cls +
          "' is not one of the " + std::to_string(classes.size()) + " classes");
    }
    if (!label_of.emplace(fs::path(file).stem().string(), it->second).second) {
      bad(o.val_labels + ": line " + std::to_string(line_no) + ": " + file +
          " is labelled a second time");
    }
  }
  std::vector<Input> inputs;
  for (const auto& path : sorted_images(o.root)) {
    auto it = label_of.find(fs::path(path).stem().string());
    if (it == label_of.end()) bad(path + ": no label in " + o.val_labels);
    inputs.push_back({path, it->second, 0});
    label_of.erase(it);
  }
  if (!label_of.empty()) {
    bad(o.val_labels + ": " + std::to_string(label_of.size()) + " labelled files are not in " +
        o.root + ", e.g. " + label_of.begin()->first);
  }
  return inputs;
}

std::vector<Input> list_inputs(const JpegFolderOptions& o, std::vector<std::string>& classes) {
  std::vector<Input> inputs;
  if (!o.val_labels.empty()) {
    inputs = list_flat(o, classes);
  } else {
    const auto folders = sorted_subfolders(o.root);
    if (folders.empty()) bad(o.root + ": no class subdirectories");
    classes = folders;
    if (!o.class_names.empty()) {
      if (o.class_names.size() != folders.size()) {
        bad(o.root + ": " + std::to_string(folders.size()) + " class folders but " +
            std::to_string(o.class_names.size()) + " --class-names");
      }
      classes = o.class_names;
    }
    for (size_t c = 0; c < folders.size(); ++c) {
      for (auto& p : sorted_images(fs::path(o.root) / folders[c])) {
        inputs.push_back({std::move(p), static_cast<int64_t>(c), 0});
      }
    }
  }
  if (inputs.empty()) bad(o.root + ": no images found");
  for (auto& in : inputs) {
    std::error_code ec;
    in.size = fs::file_size(in.path, ec);
  }
  return inputs;
}

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

// What makes a shard this conversion's: the inputs (relative paths, labels, sizes), the classes
// and the options that change the bytes.
std::string plan_digest(const JpegFolderOptions& o, const std::vector<Input>& inputs,
                        const std::vector<std::string>& classes, int64_t shards) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto text = [&](const std::string& s) { h = fnv1a(h, s.data(), s.size() + 1); };
  auto number = [&](int64_t v) { h = fnv1a(h, &v, sizeof v); };
  for (const auto& c : classes) text(c);
  for (const auto& in : inputs) {
    text(fs::relative(in.path, o.root).string());
    number(in.label);
    number(static_cast<int64_t>(in.size));
  }
  number(o.max_side);
  number(o.quality);
  number(shards);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string shard_name(const std::string& prefix, int64_t k, int64_t shards) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%05lld-of-%05lld.h5", static_cast<long long>(k),
                static_cast<long long>(shards));
  return prefix + buf;
}

std::string format_seconds(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  }
  return buf;
}

void sync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) ::close(fd);
    bad(path + ": cannot sync the finished shard");
  }
  ::close(fd);
}

void check_options(const JpegFolderOptions& o) {
  if (o.output.empty()) bad("folder --jpeg: no output prefix (-o)");
  if (o.quality < 1 || o.quality > 100) bad("--quality must be 1..100");
  if (o.max_side < 0 || o.max_side > data::kMaxSide) {
    bad("--max-side must be 0 (keep) or 1.." + std::to_string(data::kMaxSide));
  }
  if (o.shards < 0 || o.shard_size < 0 || o.threads < 0) {
    bad("--shards, --shard-size and --threads take positive numbers");
  }
}

// The shards' prefix (-o less a trailing .h5), its folder created.
std::string output_prefix(const std::string& output) {
  std::string prefix = output;
  if (prefix.size() > 3 && prefix.compare(prefix.size() - 3, 3, ".h5") == 0) {
    prefix.resize(prefix.size() - 3);
  }
  std::error_code ec;
  const fs::path parent = fs::path(prefix).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  return prefix;
}

// Shards of this prefix cut another way would be read with these by a PREFIX-*.h5 glob.
void refuse_other_shard_counts(const std::string& prefix, int64_t shards) {
  std::error_code ec;
  const fs::path parent = fs::path(prefix).parent_path();
  const std::string stem = fs::path(prefix).filename().string() + "-";
  const std::string ours = shard_name("", 0, shards).substr(6);  // "-of-0000N.h5"
  for (const auto& e : fs::directory_iterator(parent.empty() ? fs::path(".") : parent, ec)) {
    const std::string name = e.path().filename().string();
    const size_t of = name.find("-of-");
    if (name.rfind(stem, 0) == 0 && of != std::string::npos && name.size() > 3 &&
        name.compare(name.size() - 3, 3, ".h5") == 0 && name.substr(of) != ours) {
      bad(e.path().string() + " is a shard of another conversion to " + prefix +
          " (another shard count): remove those files or choose another -o");
    }
  }
}

// One output file: shard `index` of `count`, the inputs [first, last).
struct Shard {
  int64_t index = 0, count = 0;
  int64_t first = 0, last = 0;
  std::string path;
};

// Where the conversion stands, for the progress line.
struct Tally {
  int64_t inputs = 0;       // of the whole conversion
  int64_t done_before = 0;  // images of shards kept or finished in this run
  int64_t converted = 0;    // images converted in this run, and the seconds it took
  double converted_s = 0;
};

// A shard finished by an earlier run of the same plan is kept; one of another plan is an error.
bool keep_finished_shard(const Shard& shard, const std::string& plan, JpegFolderSummary& sum) {
  std::error_code ec;
  if (!fs::exists(shard.path, ec)) return false;
  const std::string theirs = data::read_string_attribute(shard.path, "converter_plan");
  if (theirs != plan) {
    bad(shard.path + " was written by another conversion (plan " +
        (theirs.empty() ? std::string("none") : theirs) + ", this one " + plan +
        "): other inputs or options; remove it or choose another -o");
  }
  ++sum.shards_kept;
  const std::string skipped = data::read_string_attribute(shard.path, "skipped_inputs");
  sum.skipped_earlier += skipped.empty() ? 0 : std::stoll(skipped);
  return true;
}

void print_progress(std::ostream& out, const Shard& shard, const Tally& p, int64_t done,
                    double shard_s, size_t skipped) {
  const double el = shard_s + p.converted_s;
  const int64_t now_done = p.converted + done;
  const double rate = el > 0 ? static_cast<double>(now_done) / el : 0;
  const int64_t total_done = p.done_before + done;
  out << "\rshard " << (shard.index + 1) << "/" << shard.count << ": " << total_done << "/"
      << p.inputs << " images, " << static_cast<int64_t>(rate) << " images/s, ETA "
      << format_seconds(rate > 0 ? static_cast<double>(p.inputs - total_done) / rate : -1)
      << ", skipped " << skipped << "    " << std::flush;
}

// Converts the shard's inputs on `threads` threads (images claimed one by one), printing
// progress to o.progress meanwhile.
std::vector<Item> convert_shard(const Shard& shard, const std::vector<Input>& inputs,
                                const JpegFolderOptions& o, int64_t threads, size_t skipped_before,
                                Tally& progress) {
  const int64_t first = shard.first, last = shard.last;
  std::vector<Item> items(static_cast<size_t>(last - first));
  std::atomic<int64_t> next{first}, done{0};
  const auto shard_t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int64_t t = 0; t < std::min<int64_t>(threads, last - first); ++t) {
    workers.emplace_back([&] {
      for (int64_t i; (i = next.fetch_add(1)) < last;) {
        items[static_cast<size_t>(i - first)] =
            convert_one(inputs[static_cast<size_t>(i)].path, o.max_side, o.quality);
        done.fetch_add(1);
      }
    });
  }
  auto last_print = shard_t0;
  while (o.progress != nullptr && done.load() < last - first) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto now = std::chrono::steady_clock::now();
    if (now - last_print < std::chrono::milliseconds(500)) continue;
    last_print = now;
    print_progress(*o.progress, shard, progress, done.load(),
                   std::chrono::duration<double>(now - shard_t0).count(), skipped_before);
  }
  for (auto& t : workers) t.join();
  progress.converted_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - shard_t0).count();
  progress.converted += last - first;
  return items;
}

// Writes the shard's converted images to PATH.partial, counting them and the skipped inputs in
// `sum`. False when every input was skipped: then there is no file (the format has no empty
// files), and a rerun looks at these inputs again.
bool write_shard(const Shard& shard, std::vector<Item>& items, const std::vector<Input>& inputs,
                 const std::vector<std::string>& classes, const std::string& plan,
                 JpegFolderSummary& sum) {
  int64_t skipped_here = 0;
  EncodedDatasetWriter writer(shard.path + ".partial", classes, 3,
                              std::string("hpctrain-data ") + kVersion);
  for (int64_t i = shard.first; i < shard.last; ++i) {
    Item& item = items[static_cast<size_t>(i - shard.first)];
    const Input& in = inputs[static_cast<size_t>(i)];
    if (!item.error.empty()) {
      sum.skipped.emplace_back(in.path, item.error);
      ++skipped_here;
      continue;
    }
    writer.add(item.bytes.data(), item.bytes.size(), item.height, item.width, in.label);
    writer.add_stats(item.stats);
    sum.encoded_bytes += static_cast<int64_t>(item.bytes.size());
    sum.pixel_bytes += static_cast<double>(item.height * item.width * 3);
    (item.as_is ? sum.stored_as_is : sum.reencoded) += 1;
    item = Item{};
  }
  if (writer.size() == 0) return false;
  writer.set_attribute("converter_plan", plan);
  writer.set_attribute("skipped_inputs", std::to_string(skipped_here));
  writer.set_attribute("shard_index", shard.index);
  writer.set_attribute("num_shards", shard.count);
  sum.samples += writer.size();
  writer.finish();
  return true;
}

// PATH.partial becomes PATH once synced; the rename is made durable too.
void publish_shard(const std::string& path) {
  sync_file(path + ".partial");
  std::error_code ec;
  fs::rename(path + ".partial", path, ec);
  if (ec) bad(path + ": cannot rename the finished shard: " + ec.message());
  common::fsync_dir(fs::path(path).parent_path().empty() ? fs::path(".")
                                                         : fs::path(path).parent_path());
}

}  // namespace

JpegFolderSummary convert_jpeg_folder(const JpegFolderOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  check_options(o);
  std::vector<std::string> classes;
  const std::vector<Input> inputs = list_inputs(o, classes);
  const auto n = static_cast<int64_t>(inputs.size());
  const int64_t shard_size = o.shard_size > 0 ? o.shard_size : kDefaultShardSize;
  const int64_t shards = std::min(n, o.shards > 0 ? o.shards : (n + shard_size - 1) / shard_size);
  const std::string plan = plan_digest(o, inputs, classes, shards);
  const std::string prefix = output_prefix(o.output);
  refuse_other_shard_counts(prefix, shards);

  JpegFolderSummary sum;
  sum.inputs = n;
  sum.threads =
      o.threads > 0 ? o.threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  Tally progress;
  progress.inputs = n;
  for (int64_t k = 0; k < shards; ++k) {
    const Shard shard{k, shards, k * n / shards, (k + 1) * n / shards,
                      shard_name(prefix, k, shards)};
    sum.outputs.push_back(shard.path);
    if (!keep_finished_shard(shard, plan, sum)) {
      std::vector<Item> items =
          convert_shard(shard, inputs, o, sum.threads, sum.skipped.size(), progress);
      if (write_shard(shard, items, inputs, classes, plan, sum)) {
        publish_shard(shard.path);
        ++sum.shards_written;
      } else {
        sum.empty_shards.push_back(shard.path);
        sum.outputs.pop_back();
      }
    }
    progress.done_before += shard.last - shard.first;
  }
  if (o.progress != nullptr) *o.progress << "\n";
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

void print_summary(std::ostream& out, const JpegFolderSummary& s) {
  out << "wrote " << s.shards_written << " shard(s), kept " << s.shards_kept
      << " finished earlier, of " << s.outputs.size();
  if (!s.outputs.empty()) {
    out << ": " << s.outputs.front()
        << (s.outputs.size() > 1 ? " ... " + s.outputs.back() : std::string());
  }
  out << "\n";
  out << "inputs " << s.inputs << ", samples written now " << s.samples << " (" << s.stored_as_is
      << " JPEGs as stored, " << s.reencoded << " re-encoded), skipped " << s.skipped.size();
  if (s.skipped_earlier > 0) out << " (and " << s.skipped_earlier << " in the shards kept)";
  out << "\n";
  for (const auto& path : s.empty_shards) {
    out << "no file for " << path << ": every one of its inputs was skipped\n";
  }
  if (s.samples > 0) {
    out << "bytes per image " << s.encoded_bytes / s.samples
        << " (decoded: " << static_cast<int64_t>(s.pixel_bytes / static_cast<double>(s.samples))
        << ", ratio "
        << (s.encoded_bytes > 0 ? s.pixel_bytes / static_cast<double>(s.encoded_bytes) : 0)
        << "x)\n";
  }
  out << "time " << s.seconds << " s with " << s.threads << " threads";
  if (s.samples > 0 && s.seconds > 0) {
    out << ", " << static_cast<double>(s.samples) / s.seconds << " images/s";
  }
  out << "\n";
  const size_t shown = std::min<size_t>(s.skipped.size(), 20);
  for (size_t i = 0; i < shown; ++i) {
    out << "skipped " << s.skipped[i].first << ": " << s.skipped[i].second << "\n";
  }
  if (s.skipped.size() > shown) out << "... and " << s.skipped.size() - shown << " more\n";
}

}  // namespace hpctrain::datasets
