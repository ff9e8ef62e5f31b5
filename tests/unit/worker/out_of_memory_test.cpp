// The worker's out-of-memory end line (runtime/worker/out_of_memory.hpp): the allocators' texts
// recognised, the failed allocation's size read from them, and the figures in words.
#include "worker/out_of_memory.hpp"

#include <gtest/gtest.h>

namespace hpctrain::worker {
namespace {

// As libtorch 2.11 threw it on the local cluster under ulimit -v (tests/slurm/causes_planted.sh).
constexpr const char* kCpu =
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
    "tried to allocate 411041792 bytes. Error code 12 (Cannot allocate memory)";
// torch 2.8-2.11 CUDACachingAllocator (end_messages.tsv).
constexpr const char* kCuda =
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.18 GiB of "
    "which 1.02 GiB is free.";

TEST(OutOfMemory, TheAllocatorsTexts) {
  EXPECT_TRUE(is_out_of_memory(kCpu));
  EXPECT_FALSE(is_device_out_of_memory(kCpu));
  EXPECT_TRUE(is_out_of_memory(kCuda));
  EXPECT_TRUE(is_device_out_of_memory(kCuda));
  EXPECT_TRUE(is_device_out_of_memory("CUDA error: out of memory"));
  EXPECT_FALSE(is_out_of_memory("weights.cpp:159: cannot save weights: No space left on device"));
}

TEST(OutOfMemory, TheFailedAllocationsSize) {
  EXPECT_EQ(failed_allocation_bytes(kCpu), 411041792u);
  EXPECT_EQ(failed_allocation_bytes(kCuda), 2ull << 30);
  EXPECT_EQ(failed_allocation_bytes("CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0"),
            22ull << 20);
  EXPECT_EQ(failed_allocation_bytes("std::bad_alloc"), std::nullopt);
  EXPECT_EQ(failed_allocation_bytes("you tried to allocate bytes"), std::nullopt);
}

TEST(OutOfMemory, TheFiguresInWords) {
  MemoryFigures m;
  m.peak_rss_bytes = 325ull << 20;
  EXPECT_EQ(out_of_memory_text(false, 411041792u, m),
            "host memory ran out: an allocation of 392.0 MiB failed; peak RSS of this rank "
            "325.0 MiB");
  m.address_space_limit = 3ull << 30;
  EXPECT_EQ(out_of_memory_text(true, std::nullopt, m),
            "device memory ran out; peak RSS of this rank 325.0 MiB; address space limited to "
            "3.0 GiB (ulimit -v)");
  EXPECT_GT(memory_figures().peak_rss_bytes, 0u);
}

}  // namespace
}  // namespace hpctrain::worker
