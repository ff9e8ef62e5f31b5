// A batch's reads (data/source.hpp, "Coalescing"): read_samples(), read_encoded() and
// will_need_samples() sort the samples of the pread path by file and offset and read (or hint)
// ranges of one file that lie close together with a single preadv(2), scattering the samples
// straight into place and the bytes between them into a discard buffer; samples of mapped,
// cached and H5Dread files are copied or read apart. Scratch buffers are per thread: loader
// workers call these once per batch.

#include <fcntl.h>
#include <sys/uio.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.hpp"
#include "data/file_reader.hpp"
#include "data/source.hpp"

namespace hpctrain::data {

struct ImageSource::Piece {
  size_t file = 0;
  uint64_t offset = 0;  // absolute file offset of the sample's pixels
  int64_t slot = 0;     // position in the caller's list
  bool operator<(const Piece& o) const {
    return file != o.file ? file < o.file : offset != o.offset ? offset < o.offset : slot < o.slot;
  }
};

void ImageSource::plan_pieces(const int64_t* samples, int64_t n, std::vector<Piece>& pieces,
                              std::vector<int64_t>& rest) const {
  pieces.clear();
  rest.clear();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = samples[i];
    if (s < 0 || s >= size()) {
      HPCTRAIN_THROW(rt::DataError, "read of sample " + std::to_string(s) +
                                        " outside the dataset of " + std::to_string(size()));
    }
    const size_t fi = file_of(s);
    const Handle& h = *handles_[fi];
    if (h.pread_path()) {
      pieces.push_back({fi, h.offset_of(s - files_[fi].first), i});
    } else {
      rest.push_back(i);
    }
  }
  std::sort(pieces.begin(), pieces.end());
}

namespace {
// Largest gap merged into one I/O; < 0: nothing is merged, not even adjacent samples.
int64_t merge_gap(const SourceOptions& o, int64_t sample_bytes) {
  return o.coalesce_reads ? std::min(o.coalesce_gap_bytes, sample_bytes) : -1;
}
}  // namespace

void ImageSource::read_encoded(const int64_t* samples, int64_t n, std::vector<uint8_t>& bytes,
                               std::vector<size_t>& starts) const {
  if (!encoded()) HPCTRAIN_THROW(rt::DataError, "read_encoded: the dataset holds pixels");
  starts.assign(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) {
    starts[static_cast<size_t>(i) + 1] = starts[static_cast<size_t>(i)] + encoded_size(samples[i]);
  }
  bytes.resize(starts.back());
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<int64_t> rest;
  thread_local std::vector<iovec> iov;
  thread_local std::vector<uint8_t> discard;
  plan_pieces(samples, n, pieces, rest);
  // Mapped, cached and H5Dread files: a copy or one H5Dread per sample.
  for (const int64_t i : rest) {
    const size_t fi = file_of(samples[i]);
    const Handle& h = *handles_[fi];
    const auto local = static_cast<size_t>(samples[i] - files_[fi].first);
    const uint64_t at = h.sample_offsets[local];
    const size_t size = starts[static_cast<size_t>(i) + 1] - starts[static_cast<size_t>(i)];
    uint8_t* dst = bytes.data() + starts[static_cast<size_t>(i)];
    if (!h.cache.empty()) {
      std::memcpy(dst, h.cache.data() + at, size);
    } else if (h.map != nullptr) {
      std::memcpy(dst, h.map + h.contiguous_offset + at, size);
    } else {
      h5::quiet();
      h5::read_rows(h.images.get(), H5T_NATIVE_UINT8, static_cast<int64_t>(at),
                    static_cast<int64_t>(size), dst, h.path + ": cannot read dataset /encoded");
    }
  }
  // pread files: sorted by offset, nearby samples in one preadv, the gaps discarded.
  const int64_t gap = options_.coalesce_reads ? options_.coalesce_gap_bytes : -1;
  if (gap > 0 && discard.size() < static_cast<size_t>(gap))
    discard.resize(static_cast<size_t>(gap));
  constexpr size_t kMaxIov = IOV_MAX >= 2 ? IOV_MAX : 2;
  auto size_of = [&](const Piece& p) {
    return starts[static_cast<size_t>(p.slot) + 1] - starts[static_cast<size_t>(p.slot)];
  };
  auto slot_of = [&](const Piece& p) { return bytes.data() + starts[static_cast<size_t>(p.slot)]; };
  for (size_t a = 0; a < pieces.size();) {
    const Handle& h = *handles_[pieces[a].file];
    iov.clear();
    iov.push_back({slot_of(pieces[a]), size_of(pieces[a])});
    uint64_t end = pieces[a].offset + size_of(pieces[a]);
    size_t b = a + 1;
    for (; b < pieces.size() && pieces[b].file == pieces[a].file; ++b) {
      const Piece& p = pieces[b];
      if (p.offset < end) continue;  // the same sample again: copied below
      if (static_cast<int64_t>(p.offset - end) > gap || iov.size() + 2 > kMaxIov) break;
      if (p.offset > end) iov.push_back({discard.data(), static_cast<size_t>(p.offset - end)});
      iov.push_back({slot_of(p), size_of(p)});
      end = p.offset + size_of(p);
    }
    io_bytes_.fetch_add(static_cast<int64_t>(end - pieces[a].offset), std::memory_order_relaxed);
    preadv_all(h.fd, iov.data(), iov.size(), pieces[a].offset, h.path, io_reads_);
    for (size_t m = a + 1; m < b; ++m) {
      if (pieces[m].offset == pieces[m - 1].offset) {
        std::memcpy(slot_of(pieces[m]), slot_of(pieces[m - 1]), size_of(pieces[m]));
      }
    }
    a = b;
  }
}

void ImageSource::read_samples(const int64_t* samples, int64_t n, uint8_t* dst) const {
  require_pixels("read_samples");
  // Scratch per thread: loader workers call this once per batch.
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<int64_t> rest;
  thread_local std::vector<iovec> iov;
  thread_local std::vector<uint8_t> discard;
  plan_pieces(samples, n, pieces, rest);
  const auto sb = static_cast<size_t>(info_.sample_bytes());
  {
    // Mapped, cached and H5Dread files: one read per run of consecutive samples (one H5Dread
    // costs far more than a copy), scattered from a scratch buffer.
    thread_local std::vector<uint8_t> run_buf;
    std::sort(rest.begin(), rest.end(), [&](int64_t x, int64_t y) {
      return samples[x] != samples[y] ? samples[x] < samples[y] : x < y;
    });
    for (size_t a = 0; a < rest.size();) {
      size_t b = a + 1;
      while (b < rest.size() && samples[rest[b]] == samples[rest[b - 1]] + 1) ++b;
      if (b - a == 1) {
        read(samples[rest[a]], 1, dst + static_cast<size_t>(rest[a]) * sb);
      } else {
        run_buf.resize((b - a) * sb);
        read(samples[rest[a]], static_cast<int64_t>(b - a), run_buf.data());
        for (size_t m = a; m < b; ++m) {
          std::memcpy(dst + static_cast<size_t>(rest[m]) * sb, run_buf.data() + (m - a) * sb, sb);
        }
      }
      a = b;
    }
  }

  const int64_t gap = merge_gap(options_, info_.sample_bytes());
  if (gap > 0 && discard.size() < static_cast<size_t>(gap))
    discard.resize(static_cast<size_t>(gap));
  // IOV_MAX bounds one preadv; each sample needs at most two entries (gap + image).
  constexpr size_t kMaxIov = IOV_MAX >= 2 ? IOV_MAX : 2;
  for (size_t a = 0; a < pieces.size();) {
    const Handle& h = *handles_[pieces[a].file];
    iov.clear();
    iov.push_back({dst + static_cast<size_t>(pieces[a].slot) * sb, sb});
    uint64_t end = pieces[a].offset + sb;
    size_t b = a + 1;
    for (; b < pieces.size() && pieces[b].file == pieces[a].file; ++b) {
      const Piece& p = pieces[b];
      if (p.offset < end) {
        // The same sample twice (padded tails): copied below from its first copy.
        continue;
      }
      if (static_cast<int64_t>(p.offset - end) > gap || iov.size() + 2 > kMaxIov) break;
      if (p.offset > end) iov.push_back({discard.data(), static_cast<size_t>(p.offset - end)});
      iov.push_back({dst + static_cast<size_t>(p.slot) * sb, sb});
      end = p.offset + sb;
    }
    io_bytes_.fetch_add(static_cast<int64_t>(end - pieces[a].offset), std::memory_order_relaxed);
    if (iov.size() == 1) {
      pread_all(h.fd, dst + static_cast<size_t>(pieces[a].slot) * sb, sb, pieces[a].offset, h.path,
                io_reads_);
    } else {
      preadv_all(h.fd, iov.data(), iov.size(), pieces[a].offset, h.path, io_reads_);
    }
    for (size_t m = a + 1; m < b; ++m) {
      if (pieces[m].offset == pieces[m - 1].offset) {
        std::memcpy(dst + static_cast<size_t>(pieces[m].slot) * sb,
                    dst + static_cast<size_t>(pieces[m - 1].slot) * sb, sb);
      }
    }
    a = b;
  }
}

void ImageSource::will_need_samples(const int64_t* samples, int64_t n) const {
  if (!any_pread_) return;
  thread_local std::vector<Piece> pieces;
  thread_local std::vector<int64_t> rest;
  plan_pieces(samples, n, pieces, rest);
  auto size_of = [&](const Piece& p) -> uint64_t {
    return encoded() ? encoded_size(samples[p.slot]) : static_cast<uint64_t>(info_.sample_bytes());
  };
  // Merged like reads: fewer, larger requests, and the gaps are as small as the reads'.
  const int64_t gap = std::max<int64_t>(
      0, encoded() ? options_.coalesce_gap_bytes : merge_gap(options_, info_.sample_bytes()));
  for (size_t a = 0; a < pieces.size();) {
    uint64_t end = pieces[a].offset + size_of(pieces[a]);
    size_t b = a + 1;
    while (b < pieces.size() && pieces[b].file == pieces[a].file &&
           pieces[b].offset <= end + static_cast<uint64_t>(gap)) {
      end = std::max(end, pieces[b].offset + size_of(pieces[b]));
      ++b;
    }
    ::posix_fadvise(handles_[pieces[a].file]->fd, static_cast<off_t>(pieces[a].offset),
                    static_cast<off_t>(end - pieces[a].offset), POSIX_FADV_WILLNEED);
    a = b;
  }
}

}  // namespace hpctrain::data
