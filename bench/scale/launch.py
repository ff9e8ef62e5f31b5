"""Starts N ranks on 127.0.0.1 as bench/dist/run.sh does (torchrun's variables), waits for all of
them and prints one JSON line of measurements (bench/scale/run.sh calls it; README.md there).

  launch.py --n N --side NAME [--torchrun] [--observe-hosts] -- CMD ARGS...

Without --torchrun, CMD is started N times with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port) set; with it, once as
`python -m torch.distributed.run --nproc-per-node N ... CMD ARGS` (CMD a Python script).

Measured from t0 (just before the first process starts):
  wall_s          until the last process exited;
  first_line_s    until rank 0's first line of stdout (the worker's table header, the peer's
                  "# peer selftest": both after the same checked collectives and a barrier);
  rendezvous_s    (--observe-hosts) until every rank's "host/R" key is in rank 0's store: the
                  worker's rendezvous, seen by one extra store client polling every 20 ms;
  maxrss_mb       peak RSS per rank (wait4's ru_maxrss: includes libtorch's shared file pages);
  private_mb      the largest private memory (smaps_rollup Private_*) of the last rank, sampled;
  threads         the most threads rank 0 had, sampled every 0.2 s;
  cpu_s_*         CPU seconds (user + system) of rank 0, the median rank and all ranks: on this
                  machine N ranks share 2 cores, so wall time mixes per-rank work with waiting for
                  a core; CPU time does not (under torchrun: the peer's own getrusage);
  mem_mb          how far MemAvailable fell below its value before the start: what the N ranks
                  really cost the machine (shared pages counted once).
The run is killed (and says so) when MemAvailable falls below --mem-floor-mib or after
--timeout-s. Ranks' stderr goes to files in --logs; the first error line comes back as `error`.
"""
import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


def status_field(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def private_mib(pid):
    total = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    total += int(line.split()[1])
    except OSError:
        return None
    return total / 1024


def rollup(pid):
    """(Pss, Pss_Anon) of a process in MiB, or None when it is gone."""
    pss = anon = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Pss_Anon:"):
                    anon = int(line.split()[1])
    except OSError:
        return None
    return pss / 1024, anon / 1024


def descendants(pid):
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out.append(int(child))
                    out.extend(descendants(int(child)))
    except OSError:
        pass
    return out


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--side", required=True)
    ap.add_argument("--rep", type=int, default=1)
    ap.add_argument("--torchrun", action="store_true")
    ap.add_argument("--observe-hosts", action="store_true")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--timeout-s", type=float, default=400)
    ap.add_argument("--mem-floor-mib", type=float, default=4096)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    return ap.parse_args()


def start_ranks(a, cmd, port, base_env):
    """The processes as (rank, Popen): torchrun once, or one per rank."""
    procs = []
    if a.torchrun:
        argv = [a.python, "-m", "torch.distributed.run", f"--nproc-per-node={a.n}", "--nnodes=1",
                "--master-addr=127.0.0.1", f"--master-port={port}"] + cmd
        # Its own session, so that a kill reaches the ranks it started too.
        err = open(os.path.join(a.logs, "torchrun.err"), "w")
        procs.append((0, subprocess.Popen(argv, env=base_env, stdout=subprocess.PIPE,
                                          stderr=err, start_new_session=True)))
        return procs
    # Rank 0 last, as bench/dist does: the others wait for its store in their connect retry.
    for rank in list(range(1, a.n)) + [0]:
        env = dict(base_env, RANK=str(rank), WORLD_SIZE=str(a.n), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(a.n))
        err = open(os.path.join(a.logs, f"rank-{rank}.err"), "w")
        # Rank 0's stdout line-buffered (through stdbuf for the worker) to time its first line.
        argv = (["stdbuf", "-oL"] + cmd) if rank == 0 else cmd
        out = subprocess.PIPE if rank == 0 else subprocess.DEVNULL
        procs.append((rank, subprocess.Popen(argv, env=env, stdout=out, stderr=err)))
        err.close()
    return procs


class Watch:
    """The threads beside the running ranks: rank 0's output, the store (--observe-hosts), and
    samples of memory and threads that also kill the run past its memory floor or timeout."""

    def __init__(self, a, procs, port, t0, base_avail):
        self.a, self.procs, self.port, self.t0 = a, procs, port, t0
        self.rank0 = [p for r, p in procs if r == 0][0]
        self.last = [p for r, p in procs if r == a.n - 1][0] if not a.torchrun else None
        self.lines = []
        self.first_line = None
        self.pss = {}
        self.rendezvous = None
        self.state = {"min_avail": base_avail, "threads": 0, "private": 0.0, "aborted": None}
        self.done = threading.Event()
        self.reader = threading.Thread(target=self.read_rank0, daemon=True)

    def start(self):
        self.reader.start()
        if self.a.observe_hosts:
            threading.Thread(target=self.observe_hosts, daemon=True).start()
        threading.Thread(target=self.sample, daemon=True).start()

    def stop(self):
        self.done.set()
        self.reader.join(timeout=5)

    def read_rank0(self):
        for raw in self.rank0.stdout:
            if self.first_line is None:
                self.first_line = time.monotonic() - self.t0
                self.measure_pss()
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def measure_pss(self):
        # Every rank is past the checks and the barrier: what they hold now, shared pages
        # divided among the processes that map them (the ranks are still waiting on rank 0's
        # next collective, so none exits meanwhile).
        pids = [p.pid for _, p in self.procs]
        if self.a.torchrun:
            pids = descendants(self.rank0.pid)
        got = [x for x in (rollup(pid) for pid in pids) if x]
        if got:
            self.pss["pss_total_mb"] = round(sum(x[0] for x in got))
            self.pss["pss_per_rank_mb"] = round(sum(x[0] for x in got) / len(got))
            self.pss["anon_per_rank_mb"] = round(sum(x[1] for x in got) / len(got))
            self.pss["pss_processes"] = len(got)

    def observe_hosts(self):
        import datetime
        import torch.distributed as dist
        keys = [f"host/{r}" for r in range(self.a.n)]
        try:
            store = dist.TCPStore("127.0.0.1", self.port, is_master=False,
                                  timeout=datetime.timedelta(seconds=self.a.timeout_s),
                                  wait_for_workers=False)
            while self.rendezvous is None:
                if store.check(keys):
                    self.rendezvous = time.monotonic() - self.t0
                    break
                time.sleep(0.02)
        except Exception:  # rank 0 gone before it was seen: leave it unknown
            pass

    def kill_all(self):
        for _, p in self.procs:
            try:
                if self.a.torchrun:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.kill()
            except OSError:
                pass

    def sample(self):
        a, state = self.a, self.state
        while not self.done.is_set():
            avail = mem_available_mib()
            state["min_avail"] = min(state["min_avail"], avail)
            th = status_field(self.rank0.pid, "Threads")
            if th and not a.torchrun:
                state["threads"] = max(state["threads"], th)
            if self.last is not None:
                pm = private_mib(self.last.pid)
                if pm:
                    state["private"] = max(state["private"], pm)
            if avail < a.mem_floor_mib and state["aborted"] is None:
                state["aborted"] = f"MemAvailable fell to {avail:.0f} MiB (floor {a.mem_floor_mib:.0f})"
                self.kill_all()
            if time.monotonic() - self.t0 > a.timeout_s and state["aborted"] is None:
                state["aborted"] = f"timed out after {a.timeout_s:.0f} s"
                self.kill_all()
            time.sleep(0.2)


def wait_all(procs, t0):
    """Per rank: peak RSS (MiB), CPU seconds, exit code and exit time since t0."""
    by_pid = {p.pid: r for r, p in procs}
    rss, codes, exit_at, cpu = {}, {}, {}, {}
    while len(codes) < len(procs):
        pid, status, ru = os.wait4(-1, 0)
        if pid not in by_pid:
            continue
        r = by_pid[pid]
        rss[r] = ru.ru_maxrss / 1024
        cpu[r] = ru.ru_utime + ru.ru_stime
        codes[r] = os.waitstatus_to_exitcode(status)
        exit_at[r] = time.monotonic() - t0
    return rss, cpu, codes, exit_at


def add_peer_records(rec, a):
    """The peer's own records (times since t0, RSS, threads)."""
    peer = []
    for r in range(a.n):
        path = os.path.join(a.logs, f"peer-{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                peer.append(json.load(f))
    if not peer:
        return
    by = {p["rank"]: p for p in peer}
    r0 = by.get(0, {})
    for k in ("import", "init", "first_all_reduce", "checked"):
        if k in r0:
            rec[f"peer_rank0_{k}_s"] = round(r0[k], 3)
    rec["peer_init_max_s"] = round(max(p["init"] for p in peer), 3)
    if a.torchrun:
        cpus = sorted(p["cpu_s"] for p in peer)
        rec.update({"cpu_s_rank0": round(by[0]["cpu_s"], 3) if 0 in by else None,
                    "cpu_s_p50": round(cpus[len(cpus) // 2], 3),
                    "cpu_s_total": round(sum(cpus), 2)})
        vals = sorted(p["maxrss_kb"] / 1024 for p in peer)
        rec.update({"maxrss_mb_p50": round(vals[len(vals) // 2]),
                    "maxrss_mb_max": round(vals[-1]),
                    "threads": max(p["threads"] for p in peer)})
    else:
        rec["peer_threads_at_end"] = r0.get("threads")


def first_error(logs):
    """The last line of the first ranks' stderr file that has one, or None."""
    for name in sorted(os.listdir(logs)):
        if name.endswith(".err"):
            with open(os.path.join(logs, name), errors="replace") as f:
                text = [l.strip() for l in f if l.strip()]
            if text:
                return f"{name}: {text[-1][:300]}"
    return None


def main():
    a = parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    n = a.n
    os.makedirs(a.logs, exist_ok=True)
    if a.observe_hosts:
        # Loaded before t0: importing torch takes a core for a second or more.
        import torch.distributed  # noqa: F401
    port = free_port()
    base_avail = mem_available_mib()
    t0_wall = time.time()
    base_env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                    SCALE_T0=repr(t0_wall), SCALE_OUT=a.logs)
    t0 = time.monotonic()
    procs = start_ranks(a, cmd, port, base_env)
    started_s = time.monotonic() - t0
    watch = Watch(a, procs, port, t0, base_avail)
    watch.start()
    rss, cpu, codes, exit_at = wait_all(procs, t0)
    wall = max(exit_at.values())
    watch.stop()

    state = watch.state
    rec = {"n": n, "side": a.side, "rep": a.rep, "port": port,
           "ok": all(c == 0 for c in codes.values()) and state["aborted"] is None,
           "failed_ranks": sum(1 for c in codes.values() if c != 0),
           "wall_s": round(wall, 3), "spawn_s": round(started_s, 3),
           "first_line_s": round(watch.first_line, 3) if watch.first_line is not None else None,
           "rank0_exit_s": round(exit_at[0], 3),
           "rendezvous_s": round(watch.rendezvous, 3) if watch.rendezvous is not None else None,
           "mem_mb": round(base_avail - state["min_avail"]),
           "aborted": state["aborted"], "rank0_lines": watch.lines[:3]}
    rec.update(watch.pss)
    if not a.torchrun:
        vals = sorted(rss.values())
        cpus = sorted(cpu.values())
        rec.update({"maxrss_mb_p50": round(vals[len(vals) // 2]), "maxrss_mb_max": round(vals[-1]),
                    "private_mb": round(state["private"]), "threads": state["threads"]})
        rec.update({"cpu_s_rank0": round(cpu[0], 3), "cpu_s_p50": round(cpus[len(cpus) // 2], 3),
                    "cpu_s_total": round(sum(cpus), 2)})
    add_peer_records(rec, a)
    if not rec["ok"]:
        error = first_error(a.logs)
        if error is not None:
            rec["error"] = error
    print(json.dumps(rec), flush=True)

if __name__ == "__main__":
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    main()
