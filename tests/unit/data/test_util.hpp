// Helpers for the data unit tests: a temporary directory, small synthetic datasets whose pixels
// encode their sample index (so a test can tell which sample it got), and HDF5 surgery to damage
// valid files in specific ways.
// Thread safety: test-only, single-threaded.
#pragma once

#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/format.hpp"
#include "dataset_info.hpp"
#include "dataset_writer.hpp"
#include "support/temp_dir.hpp"

namespace hpctrain::data::testing {

using test::TempDir;

// Pixel p of sample i; distinct per sample for the first bytes.
inline uint8_t pixel_value(int64_t sample, int64_t p) {
  return static_cast<uint8_t>((sample * 131 + p * 7 + (sample >> 8) * 17) & 0xff);
}
inline int64_t label_of(int64_t sample, int64_t classes) { return (sample * 7 + 3) % classes; }

// Writes a valid dataset of n samples (global indices first..first+n for pixel/label content).
inline void make_dataset(const std::string& path, int64_t n, int64_t h, int64_t w, int64_t c,
                         int64_t classes = 10, int64_t chunk_images = 0, int64_t first = 0) {
  std::vector<std::string> names;
  for (int64_t k = 0; k < classes; ++k) names.push_back("class" + std::to_string(k));
  datasets::DatasetWriter writer(path, n, h, w, c, names, {chunk_images});
  const int64_t sb = h * w * c;
  std::vector<uint8_t> images(static_cast<size_t>(n * sb));
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < sb; ++p) images[i * sb + p] = pixel_value(first + i, p);
    labels[i] = label_of(first + i, classes);
  }
  writer.write(0, n, images.data(), labels.data());
  writer.finish();
}

// Opens a file read-write for surgery; closes on destruction.
class RawFile {
 public:
  explicit RawFile(const std::string& path) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    id_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  }
  ~RawFile() {
    if (id_ >= 0) H5Fclose(id_);
  }
  hid_t id() const { return id_; }

  void remove(const char* name) { H5Ldelete(id_, name, H5P_DEFAULT); }

  // Creates a chunked dataset without writing it (storage allocated late, so huge shapes cost
  // nothing on disk).
  void create(const char* name, hid_t type, std::vector<hsize_t> dims) {
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    std::vector<hsize_t> chunk(dims.size(), 1);
    if (!dims.empty() && dims[0] > 0) {
      for (size_t i = 1; i < dims.size(); ++i) chunk[i] = std::min<hsize_t>(dims[i], 64);
    }
    H5Pset_chunk(dcpl, static_cast<int>(dims.size()), chunk.data());
    hid_t ds = H5Dcreate2(id_, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  }

  void set_int_attr(const char* name, int64_t value) {
    H5Adelete(id_, name);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(id_, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attr, H5T_NATIVE_INT64, &value);
    H5Aclose(attr);
    H5Sclose(space);
  }

  void write_label(int64_t index, int64_t value) {
    write_element(kLabelsName, H5T_NATIVE_INT64, index, &value);
  }

  // Overwrites element `index` of the 1-D dataset `name` with *value (of memory type mem_type).
  void write_element(const char* name, hid_t mem_type, int64_t index, const void* value) {
    hid_t ds = H5Dopen2(id_, name, H5P_DEFAULT);
    hid_t fspace = H5Dget_space(ds);
    const hsize_t start[1] = {static_cast<hsize_t>(index)}, count[1] = {1};
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t mspace = H5Screate_simple(1, count, nullptr);
    H5Dwrite(ds, mem_type, mspace, fspace, H5P_DEFAULT, value);
    H5Sclose(mspace);
    H5Sclose(fspace);
    H5Dclose(ds);
  }

  // File offset of the chunk holding element `index` of a 1-D or 4-D dataset.
  uint64_t chunk_offset(const char* name, int rank) {
    hid_t ds = H5Dopen2(id_, name, H5P_DEFAULT);
    std::vector<hsize_t> coord(static_cast<size_t>(rank), 0);
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    H5Dget_chunk_info_by_coord(ds, coord.data(), &mask, &addr, &size);
    H5Dclose(ds);
    return addr;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

}  // namespace hpctrain::data::testing
