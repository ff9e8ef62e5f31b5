#include "dist/node_board.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/unique_fd.hpp"

namespace hpctrain::dist {
namespace {

constexpr uint64_t kMagic = 0x6870637472686231ULL;  // "hpctrhb1"
constexpr size_t kVerdictBytes = 8192;

using A64 = std::atomic<uint64_t>;
using AI64 = std::atomic<int64_t>;
using A32 = std::atomic<uint32_t>;
static_assert(A64::is_always_lock_free && AI64::is_always_lock_free && A32::is_always_lock_free,
              "the board's atomics must be lock-free to be shared between processes");
static_assert(sizeof(A64) == 8 && sizeof(A32) == 4, "the board's layout assumes plain sizes");

std::string board_dir() {
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

std::string os_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

struct NodeBoard::Header {
  A64 magic;
  A64 slots;
  A64 leader_beats;
  A32 verdict_claimed;
  A32 verdict_length;  // set last: the text is complete once it is non-zero
  char verdict[kVerdictBytes];
};

struct NodeBoard::Slot {
  A64 beats;
  A32 left;
  A32 phase;
  A64 counter;
  AI64 step;
  AI64 first;
  AI64 detail;
  A64 pad[2];
};

std::string NodeBoard::path_for(const std::string& token, const std::string& node) {
  std::string safe;
  for (const char c : node)
    safe += std::isalnum(static_cast<unsigned char>(c)) || c == '-' ? c : '_';
  return board_dir() + "/hpctrain-hb-" + token + "-" + safe + "-" + std::to_string(::getuid());
}

NodeBoard::NodeBoard(std::string path, int slots) : path_(std::move(path)), slots_(slots) {
  size_ = sizeof(Header) + static_cast<size_t>(slots) * sizeof(Slot);
  UniqueFd fd(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0)
    HPCTRAIN_THROW(rt::Error, os_error("cannot open the node's heartbeat board", path_));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) HPCTRAIN_THROW(rt::Error, os_error("cannot stat", path_));
  if (!S_ISREG(st.st_mode) || st.st_uid != ::getuid()) {
    HPCTRAIN_THROW(rt::Error, "the node's heartbeat board " + path_ +
                                  " is not a regular file of this user: refusing it");
  }
  // The first to open it sizes it (zeroes: every counter at 0); the others find that size.
  if (st.st_size == 0 && ::ftruncate(fd.get(), static_cast<off_t>(size_)) != 0) {
    HPCTRAIN_THROW(rt::Error, os_error("cannot size the node's heartbeat board", path_));
  }
  if (::fstat(fd.get(), &st) != 0 || static_cast<size_t>(st.st_size) != size_) {
    HPCTRAIN_THROW(rt::Error, "the node's heartbeat board " + path_ + " is " +
                                  std::to_string(st.st_size) + " bytes, not the " +
                                  std::to_string(size_) + " of " + std::to_string(slots) +
                                  " ranks: another job's, or the ranks disagree on the node");
  }
  map_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    HPCTRAIN_THROW(rt::Error, os_error("cannot map the node's heartbeat board", path_));
  }
  uint64_t expected = 0;
  header()->magic.compare_exchange_strong(expected, kMagic);
  header()->slots.store(static_cast<uint64_t>(slots));
  if (header()->magic.load() != kMagic) {
    ::munmap(map_, size_);
    map_ = nullptr;
    HPCTRAIN_THROW(rt::Error, "the node's heartbeat board " + path_ + " is not ours");
  }
}

NodeBoard::~NodeBoard() {
  if (map_) ::munmap(map_, size_);
}

NodeBoard::Header* NodeBoard::header() const { return static_cast<Header*>(map_); }

NodeBoard::Slot* NodeBoard::slot(int i) const {
  static_assert(sizeof(Slot) == 64, "one cache line a slot");
  return reinterpret_cast<Slot*>(static_cast<char*>(map_) + sizeof(Header)) + i;
}

void NodeBoard::beat(int i, const progress::Snapshot& where) {
  Slot* s = slot(i);
  s->counter.store(where.counter, std::memory_order_relaxed);
  s->step.store(where.step, std::memory_order_relaxed);
  s->first.store(where.first, std::memory_order_relaxed);
  s->detail.store(where.detail, std::memory_order_relaxed);
  s->phase.store(static_cast<uint32_t>(where.phase), std::memory_order_relaxed);
  s->beats.fetch_add(1, std::memory_order_release);
}

void NodeBoard::leave(int i, const progress::Snapshot& where) {
  beat(i, where);
  slot(i)->left.store(1, std::memory_order_release);
}

NodeBoard::SlotView NodeBoard::read(int i) const {
  const Slot* s = slot(i);
  SlotView v;
  v.beats = s->beats.load(std::memory_order_acquire);
  v.left = s->left.load(std::memory_order_acquire) != 0;
  v.where.counter = s->counter.load(std::memory_order_relaxed);
  v.where.step = s->step.load(std::memory_order_relaxed);
  v.where.first = s->first.load(std::memory_order_relaxed);
  v.where.detail = static_cast<int>(s->detail.load(std::memory_order_relaxed));
  const uint32_t phase = s->phase.load(std::memory_order_relaxed);
  v.where.phase = phase < static_cast<uint32_t>(progress::kPhases)
                      ? static_cast<progress::Phase>(phase)
                      : progress::Phase::kStarting;
  return v;
}

void NodeBoard::leader_beat() { header()->leader_beats.fetch_add(1, std::memory_order_release); }

uint64_t NodeBoard::leader_beats() const {
  return header()->leader_beats.load(std::memory_order_acquire);
}

void NodeBoard::post_verdict(const std::string& verdict) {
  uint32_t expected = 0;
  if (!header()->verdict_claimed.compare_exchange_strong(expected, 1)) return;
  const size_t n = std::min(verdict.size(), kVerdictBytes);
  std::memcpy(header()->verdict, verdict.data(), n);
  header()->verdict_length.store(static_cast<uint32_t>(std::max<size_t>(n, 1)),
                                 std::memory_order_release);
}

std::optional<std::string> NodeBoard::verdict() const {
  const uint32_t n = header()->verdict_length.load(std::memory_order_acquire);
  if (n == 0) return std::nullopt;
  return std::string(header()->verdict, n);
}

void NodeBoard::remove() { ::unlink(path_.c_str()); }

}  // namespace hpctrain::dist
