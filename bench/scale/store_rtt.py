"""Rank 0's heartbeat watch and the rendezvous against a real c10d TCPStore (the libuv backend,
torch's default), on this machine. bench/scale/run.sh calls it.

1. Latency of one store operation: a store server and one client in this process, as on rank 0
   (the worker's heartbeat client talks to the store its own process serves, over loopback), in
   the watch's pattern before 2026-11-25 23:38 (add(hb/beat/R, 0), check(hb/where/R),
   get(hb/where/R) per rank, one after another), alone and while LOAD_THREADS other clients
   (threads of a second process, each its own connection) beat as fast as they can (add, set,
   check: what every other rank sends once a second): the store's throughput and its latency when
   busy.
2. multi_get of N keys (the watch now: runtime/dist/heartbeat.cpp watch_counters and
   watch_progress read every beat counter with one multiGet and every progress record with
   another). c10d's TCPStore::multiGet is two round trips on the wire (a WAIT for all N keys, then
   MULTI_GET), with O(N) work on the server and O(N) bytes back. Measured at --mget sizes, idle and
   busy; the round is modelled as rank 0's own add + 2 multi_gets of N-1 keys, with the time of a
   multi_get fitted as a + b*N to the measured points.
3. The rendezvous (runtime/dist/process_group.cpp register_and_wait), emulated with N client
   threads against the store (the clients share the cores with the server here: an upper bound).
   per-key: the protocol before 2026-11-25 (check host/0..N-1 one key per round trip every
   100 ms, then N gets: ~N^2 operations); counter: the protocol now (set host/R, add(arrived, 1),
   then every 100 ms check(rendezvous/failed) (ranks > 0) and add(arrived, 0) until it reaches N,
   then one multi_get of the N host keys).
The Python binding adds its own overhead to each call; the worker's C++ client pays somewhat
less.
Usage: store_rtt.py [--ops 30000] [--load-threads 1,4] [--mget 64,1024,4096,10240]
                    [--rdzv 64,256,1024] [--per-key-max 512]
"""

import argparse
import datetime
import multiprocessing as mp
import os
import threading
import time

# Before torch loads: c10d warns once per client connection otherwise.
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
import torch.distributed as dist  # noqa: E402

TIMEOUT = datetime.timedelta(seconds=300)


def client(port):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT,
                         wait_for_workers=False)


def watch_round(store, ranks, lat=None):
    """One of rank 0's watch rounds over `ranks` other ranks; per-op latencies into `lat`."""
    for r in ranks:
        for op in (lambda: store.add(f"hb/beat/{r}", 0),
                   lambda: store.check([f"hb/where/{r}"]),
                   lambda: store.get(f"hb/where/{r}")):
            t = time.perf_counter()
            op()
            if lat is not None:
                lat.append(time.perf_counter() - t)


def load_proc(port, threads, seconds, out):
    """A second process: `threads` clients each beating as fast as it can (add, set, check)."""
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def beat(i):
        s = client(port)
        key = f"load/{os.getpid()}/{i}"
        n = 0
        while time.monotonic() < stop:
            s.add(key + "/beat", 1)
            s.set(key + "/where", "step 12 phase 3 counter 99")
            s.check(["hb/verdict"])
            n += 3
        counts[i] = n

    ts = [threading.Thread(target=beat, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(sum(counts))


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure_latency(server, port, ops, load_threads):
    store = client(port)
    ranks = list(range(1, 1 + ops // 3))
    for r in ranks:
        store.set(f"hb/where/{r}", "step 12 phase 3 counter 99 first 1 detail allreduce")
        store.add(f"hb/beat/{r}", 1)
    watch_round(store, ranks[:2000])  # warm up
    results = []
    for threads in [0] + load_threads:
        q = mp.Queue()
        proc = None
        if threads:
            proc = mp.get_context("fork").Process(target=load_proc, args=(port, threads, 6.0, q))
            proc.start()
            time.sleep(1.5)  # the load's clients connected and running
        lat = []
        t = time.perf_counter()
        watch_round(store, ranks, lat)
        elapsed = time.perf_counter() - t
        load_ops = 0
        if proc:
            load_ops = q.get()
            proc.join()
        results.append({
            "load_threads": threads,
            "ops": len(lat),
            "mean_us": elapsed / len(lat) * 1e6,
            "p50_us": pct(lat, 0.5) * 1e6,
            "p99_us": pct(lat, 0.99) * 1e6,
            "watch_ops_per_s": len(lat) / elapsed,
            "load_ops_per_s": load_ops / 6.0 if threads else 0,
        })
    return results


def measure_multi_get(port, sizes, load_threads):
    """multi_get of n keys (beat counters, then ~60-byte progress records), idle and while
    `load_threads` other clients beat; seconds per call."""
    store = client(port)
    results = []
    for n in sizes:
        beats = [f"mg/{n}/beat/{r}" for r in range(n)]
        wheres = [f"mg/{n}/where/{r}" for r in range(n)]
        for r in range(n):
            store.add(beats[r], 1)
            store.set(wheres[r], "step 12 phase 3 counter 99 first 1 detail allreduce")
        reps = max(10, min(200, 200_000 // n))
        for _ in range(3):  # warm up
            store.multi_get(beats)
        for threads in (0, load_threads):
            q = mp.Queue()
            proc = None
            if threads:
                proc = mp.get_context("fork").Process(target=load_proc,
                                                      args=(port, threads, 6.0, q))
                proc.start()
                time.sleep(1.5)
            times = {"beat": [], "where": []}
            end = time.monotonic() + (3.5 if threads else 1e9)
            for _ in range(reps):
                for kind, keys in (("beat", beats), ("where", wheres)):
                    t = time.perf_counter()
                    values = store.multi_get(keys)
                    times[kind].append(time.perf_counter() - t)
                if time.monotonic() > end:
                    break
            load_ops = 0
            if proc:
                load_ops = q.get()
                proc.join()
            assert len(values) == n
            results.append({
                "n": n, "load_threads": threads, "calls": len(times["beat"]),
                "beat_mean_ms": sum(times["beat"]) / len(times["beat"]) * 1e3,
                "where_mean_ms": sum(times["where"]) / len(times["where"]) * 1e3,
                "where_p99_ms": pct(times["where"], 0.99) * 1e3,
                "bytes": sum(len(v) for v in values),
                "load_ops_per_s": load_ops / 6.0 if threads else 0,
            })
    return results


def fit(points):
    """a + b*x through the smallest and the largest x measured (a, b >= 0): the per-key cost
    from the large sizes, where it dominates, rather than from noise at the small ones."""
    (x0, y0), (x1, y1) = min(points), max(points)
    b = max(0.0, (y1 - y0) / (x1 - x0)) if x1 > x0 else 0.0
    return max(0.0, y0 - b * x0), b


def rendezvous(port, n, mode):
    """n client threads; each sets host/R, waits for all, then reads every host key.
    mode 'per-key': check one key per round trip every 100 ms, then n gets (before 2026-11-25);
    'counter': add(arrived, 1), then every 100 ms check the verdict key (ranks > 0) and
    add(arrived, 0) until it reaches n, then one multi_get (the worker's register_and_wait now)."""
    prefix = f"rdzv/{mode}/{n}/"
    keys = [f"{prefix}host/{r}" for r in range(n)]
    ops = [0] * n
    done = [0.0] * n
    barrier = threading.Barrier(n + 1)
    stores = [None] * n

    def connect(r):
        stores[r] = client(port)

    # Connect first (not timed: the connection storm is the store's constructor, the same in both).
    cs = [threading.Thread(target=connect, args=(r,)) for r in range(n)]
    for t in cs:
        t.start()
    for t in cs:
        t.join()

    def rank(r):
        s = stores[r]
        barrier.wait()
        s.set(keys[r], f"node{r // 4:04d}")
        k = 1
        if mode == "counter":
            s.add(prefix + "arrived", 1)
            k += 1
        while True:
            if mode == "per-key":
                missing = 0
                for key in keys:
                    k += 1
                    if not s.check([key]):
                        missing += 1
                if missing == 0:
                    break
            else:
                if r != 0:
                    k += 1
                    s.check([prefix + "rendezvous/failed"])
                k += 1
                if s.add(prefix + "arrived", 0) >= n:
                    break
            time.sleep(0.1)
        if mode == "per-key":
            for key in keys:
                s.get(key)
            k += n
        else:
            s.multi_get(keys)
            k += 1  # on the wire: a WAIT and a MULTI_GET
        ops[r] = k
        done[r] = time.perf_counter()

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in ts:
        t.join()
    for s in stores:
        del s
    return {"n": n, "mode": mode, "seconds": max(done) - start, "ops": sum(ops)}


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=30000)
    ap.add_argument("--load-threads", default="1,4")
    ap.add_argument("--mget", default="64,1024,4096,10240")
    ap.add_argument("--rdzv", default="64,256,1024")
    ap.add_argument("--per-key-max", type=int, default=512,
                    help="emulate the per-key rendezvous (before) only up to this many ranks")
    return ap.parse_args()


def print_latency(lat):
    """Part 1's table and the store's throughput."""
    print("### c10d TCPStore (libuv backend) on this machine, Python client")
    print()
    print("One operation at a time in the old watch's pattern (add, check, get per rank, one after")
    print("another on one connection to the store its own process serves), alone and while other")
    print("clients beat (add, set, check) as fast as they can from a second process.")
    print()
    print("| other clients beating | ops | mean us/op | p50 us | p99 us | ops/s"
          " | others' ops/s served meanwhile |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in lat:
        print(f"| {r['load_threads']} | {r['ops']} | {r['mean_us']:.1f} | {r['p50_us']:.1f}"
              f" | {r['p99_us']:.1f} | {r['watch_ops_per_s']:.0f} | {r['load_ops_per_s']:.0f} |")
    capacity = max(r["watch_ops_per_s"] + r["load_ops_per_s"] for r in lat)
    print()
    print(f"Store throughput seen: {capacity:.0f} ops/s in all (watch + others; server and clients")
    print(f"share {os.cpu_count()} cores here, so a server with a core of its own does more).")


def print_multi_get(mg):
    """Part 2's table; returns the fits (a, b) of one round's two multi_gets, idle and busy."""
    print()
    print("### multi_get of N keys (the watch's read since 2026-11-25 23:38)")
    print()
    print("beat: N counters (a few bytes each); progress: N records of 51 bytes. One call is a")
    print("WAIT for the N keys and a MULTI_GET: two round trips, O(N) work on the server.")
    print()
    print("| keys | other clients beating | calls | beat multi_get ms | progress multi_get ms"
          " | progress p99 ms | progress bytes back | others' ops/s meanwhile |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in mg:
        print(f"| {r['n']} | {r['load_threads']} | {r['calls']} | {r['beat_mean_ms']:.2f}"
              f" | {r['where_mean_ms']:.2f} | {r['where_p99_ms']:.2f} | {r['bytes']}"
              f" | {r['load_ops_per_s']:.0f} |")
    fits = {}
    for threads in sorted({r["load_threads"] for r in mg}):
        pts = [(r["n"], (r["beat_mean_ms"] + r["where_mean_ms"]) / 1e3)
               for r in mg if r["load_threads"] == threads]
        fits[threads] = fit(pts)
    f_idle = fits[min(fits)]
    f_busy = fits[max(fits)]
    print()
    print(f"Line through the smallest and largest N, both multi_gets of one round (s) = a + b*N: idle a = {f_idle[0] * 1e3:.2f} ms,"
          f" b = {f_idle[1] * 1e6:.2f} us per key; busy a = {f_busy[0] * 1e3:.2f} ms,"
          f" b = {f_busy[1] * 1e6:.2f} us per key.")
    return f_idle, f_busy


def print_watch_model(idle, busy, f_idle, f_busy):
    """Part 2's model of rank 0's watch round, before and now."""
    print()
    print("### Rank 0's heartbeat watch round, before and now (model from the measurements)")
    print()
    print("before: rank 0's own add + 3 round trips per other rank (add(beat, 0), check(where),")
    print("get(where)), one after another, at the measured per-operation latency. now: its own add")
    print("+ one multi_get of the N-1 beat counters + one of the N-1 progress records (a rank's")
    print("record is looked for alone only until it exists), from the fit above. Every other rank")
    print("still sends add, set, check once a second: 3(N-1) ops/s. busy: while"
          f" {busy['load_threads']} clients sent {busy['load_ops_per_s']:.0f} ops/s.")
    print()
    print("| ranks | before: ops per round | before: round idle (s) | before: round busy (s)"
          " | now: round trips per round | now: round idle (s) | now: round busy (s)"
          " | others' beat ops/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (8, 64, 256, 1024, 2048, 4096, 8192, 10240, 16384, 65536):
        ops = 3 * (n - 1) + 1
        before_idle = ops * idle / 1e6
        before_busy = ops * busy["mean_us"] / 1e6
        now_idle = idle / 1e6 + f_idle[0] + f_idle[1] * (n - 1)
        now_busy = busy["mean_us"] / 1e6 + f_busy[0] + f_busy[1] * (n - 1)
        print(f"| {n} | {ops} | {before_idle:.3f} | {before_busy:.3f} | 5 | {now_idle:.4f}"
              f" | {now_busy:.4f} | {3 * (n - 1)} |")


def print_rendezvous(port, rsizes, per_key_max):
    """Part 3: the rendezvous emulated at each size."""
    print()
    print("### Rendezvous, emulated (N client threads in one process, 100 ms poll)")
    print()
    print("per-key: register_and_wait before 2026-11-25 (check one key per round trip, then N")
    print("gets); counter: register_and_wait now (add(arrived, 1); per poll check(verdict) and")
    print(f"add(arrived, 0); then one multi_get). per-key only up to {per_key_max} ranks.")
    print()
    print("| ranks | per-key s | per-key store ops | counter s | counter store ops |")
    print("|---:|---:|---:|---:|---:|")
    for n in rsizes:
        a1 = rendezvous(port, n, "per-key") if n <= per_key_max else None
        a2 = rendezvous(port, n, "counter")
        before = f"{a1['seconds']:.2f} | {a1['ops']}" if a1 else "– | –"
        print(f"| {n} | {before} | {a2['seconds']:.2f} | {a2['ops']} |", flush=True)


def main():
    a = parse_args()
    server = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=TIMEOUT,
                           wait_for_workers=False, use_libuv=True)
    port = server.port
    load_threads = [int(x) for x in a.load_threads.split(",") if x]
    lat = measure_latency(server, port, a.ops, load_threads)
    print_latency(lat)

    sizes = [int(x) for x in a.mget.split(",") if x]
    mg = measure_multi_get(port, sizes, max(load_threads) if load_threads else 0)
    f_idle, f_busy = print_multi_get(mg)
    print_watch_model(lat[0]["mean_us"], lat[-1], f_idle, f_busy)

    rsizes = [int(x) for x in a.rdzv.split(",") if x]
    if rsizes:
        print_rendezvous(port, rsizes, a.per_key_max)

if __name__ == "__main__":
    main()
