"""The Python peer of hpctrain-worker --selftest's bandwidth table: torch.distributed with the
gloo backend, all-reducing the same sizes with the same warmup and iteration counts. Started once
per rank with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set; rank 0 prints "bytes us busbw"."""
import os
import sys
import time

import torch
import torch.distributed as dist

max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
dist.init_process_group("gloo")
n = dist.get_world_size()
size = 8
while size <= max_bytes:
    t = (torch.arange(size // 4, dtype=torch.float32) % 13 + 1) * (dist.get_rank() + 1)
    for _ in range(3):
        dist.all_reduce(t)
    iters = 20 if size < (16 << 20) else 5
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    seconds = (time.perf_counter() - start) / iters
    if dist.get_rank() == 0:
        algbw = size / seconds / 1e9
        print(f"{size} {seconds * 1e6:.1f} {algbw * 2 * (n - 1) / n:.4f}", flush=True)
    size *= 4
dist.destroy_process_group()
