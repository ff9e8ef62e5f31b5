// Runs files through a libFuzzer entry point without libFuzzer, so any compiler (and CI's
// ASan+UBSan build) can replay a corpus and the reproducers of fixed bugs:
//   jpeg_fuzz_replay PATH...   each PATH a file or a directory (its regular files, sorted)
// Exit 0 once every input ran; 1 when a path cannot be read or no input was found (a replay of
// nothing must fail). A broken invariant or a crash aborts in the entry point itself, and so does
// a C++ allocation over kMallocLimit, as libFuzzer's -malloc_limit_mb (the -rss_limit_mb=2048 of
// docs/development.md) does: a size taken on trust from a file is a finding, not a slow pass.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
constexpr size_t kMallocLimit = size_t{2048} << 20;
}  // namespace

// Replaces the global operator new (and so new[], which calls it) for this executable.
void* operator new(size_t size) {
  if (size > kMallocLimit) {
    std::fprintf(stderr, "replay: an allocation of %zu bytes, over the limit of %zu\n", size,
                 kMallocLimit);
    std::abort();
  }
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// GCC takes free() of what operator new returned for a mismatch; here both are malloc's.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

namespace fs = std::filesystem;

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return false;
  }
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
  // Named first: a finding aborts the process.
  std::printf("replay: %s\n", file.c_str());
  std::fflush(stdout);
  // A copy of exactly the input's size, so reading past it is a sanitizer report, as in libFuzzer.
  std::vector<uint8_t> exact(bytes);
  LLVMFuzzerTestOneInput(exact.data(), exact.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 1;
  }
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path path(argv[i]);
    std::error_code ec;
    std::vector<fs::path> files;
    if (fs::is_directory(path, ec)) {
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(path);
    }
    if (ec) {
      std::fprintf(stderr, "replay: cannot list %s: %s\n", path.c_str(), ec.message().c_str());
      return 1;
    }
    for (const auto& file : files) {
      if (!replay(file)) return 1;
      ++count;
    }
  }
  if (count == 0) {
    std::fprintf(stderr, "replay: no input found\n");
    return 1;
  }
  std::printf("replay: %zu inputs ran\n", count);
  return 0;
}
