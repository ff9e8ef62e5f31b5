// The worker's end line for a rank that ran out of memory (docs/resilience.md "Why an attempt
// ended"): what could not be allocated, where the allocator says, and the figures a user sizes
// train.batch_size by: the rank's peak resident memory and the address-space limit it ran under.
// Torch-free, so its test builds in seconds.
// Thread safety: pure functions, and memory_figures(), which reads this process's own usage.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hpctrain::worker {

// Whether an exception's text is an allocator saying it ran out: libtorch's CPU allocator
// ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes ...") or CUDA's
// caching allocator ("CUDA out of memory. Tried to allocate 2.00 GiB. ...").
bool is_out_of_memory(std::string_view what);
// Whether it is the device's memory (CUDA's) rather than the host's.
bool is_device_out_of_memory(std::string_view what);

// The bytes the allocator was asked for, where its text says: "you tried to allocate 411041792
// bytes" (CPU) or "Tried to allocate 2.00 GiB" (CUDA).
std::optional<uint64_t> failed_allocation_bytes(std::string_view what);

struct MemoryFigures {
  uint64_t peak_rss_bytes = 0;                  // getrusage's ru_maxrss
  std::optional<uint64_t> address_space_limit;  // RLIMIT_AS (ulimit -v), when there is one
};
MemoryFigures memory_figures();  // this process's, now

// "host memory ran out: an allocation of 392.0 MiB failed; peak RSS of this rank 310.4 MiB;
// address space limited to 3.0 GiB (ulimit -v)": what the oom end line says after its cause.
std::string out_of_memory_text(bool device, std::optional<uint64_t> failed,
                               const MemoryFigures& figures);

}  // namespace hpctrain::worker
