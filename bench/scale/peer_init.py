"""The Python peer of `hpctrain-worker --selftest` for the scale benchmark (bench/scale/run.sh).

Started once per rank with the torchrun variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
directly or under torchrun. It does what the worker's self test does, in the same order, so that
the two can be compared at the same point:

  import torch; init_process_group("gloo", init_method="env://");
  for 1, 7, 1000, 65537, 2**20 floats: all-reduce, broadcast from the last rank, broadcast from
  rank 0 (each result checked); barrier; rank 0 prints "# peer selftest" (the worker prints its
  table header here); the bandwidth table up to MAX_BYTES (3 warmup + 20 timed all-reduces per
  size); one all-reduce of the failure count.

Each rank writes SCALE_OUT/peer-RANK.json: seconds since SCALE_T0 (the launcher's time.time()
just before it started the first rank) at each point, its peak RSS and thread count.
Usage: peer_init.py [MAX_BYTES]
"""
import time

T_START = time.time()

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

T_IMPORT = time.time()


def pattern(numel, rank):
    return (torch.arange(numel, dtype=torch.float32) % 13 + 1) * (rank + 1)


def threads():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def main():
    max_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    t0 = float(os.environ.get("SCALE_T0", T_START))
    dist.init_process_group("gloo", init_method="env://")
    t_init = time.time()
    rank, n = dist.get_rank(), dist.get_world_size()
    failures = 0
    t_first = None
    for numel in (1, 7, 1000, 65537, 1 << 20):
        t = pattern(numel, rank)
        dist.all_reduce(t)
        if t_first is None:
            t_first = time.time()
        failures += int(not torch.equal(t, pattern(numel, 0) * (n * (n + 1) // 2)))
        for root in (n - 1, 0):
            t = pattern(numel, root) if rank == root else torch.full((numel,), -1.0)
            dist.broadcast(t, root)
            failures += int(not torch.equal(t, pattern(numel, root)))
    dist.barrier()
    t_checked = time.time()
    if rank == 0:
        print(f"# peer selftest: gloo, {n} ranks", flush=True)
    size = 8
    while size <= max_bytes:
        t = pattern(size // 4, rank)
        for _ in range(3):
            dist.all_reduce(t)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(20):
            dist.all_reduce(t)
        us = (time.perf_counter() - start) / 20 * 1e6
        t = pattern(size // 4, rank)
        dist.all_reduce(t)
        failures += int(not torch.equal(t, pattern(size // 4, 0) * (n * (n + 1) // 2)))
        if rank == 0:
            print(f"{size} {us:.1f}", flush=True)
        size *= 4
    total = torch.tensor([float(failures)])
    dist.all_reduce(total)
    t_done = time.time()
    if rank == 0:
        print(f"# peer selftest {'FAILED' if total.item() else 'passed'}", flush=True)
    out = os.environ.get("SCALE_OUT")
    if out:
        record = {
            "rank": rank,
            "start": T_START - t0,
            "import": T_IMPORT - t0,
            "init": t_init - t0,
            "first_all_reduce": t_first - t0,
            "checked": t_checked - t0,
            "done": t_done - t0,
            "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),
            "threads": threads(),
            "failures": int(total.item()),
        }
        with open(os.path.join(out, f"peer-{rank}.json"), "w") as f:
            json.dump(record, f)
    dist.destroy_process_group()
    return 1 if total.item() else 0


if __name__ == "__main__":
    sys.exit(main())
