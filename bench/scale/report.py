"""Markdown tables from bench/scale/run.sh's JSON lines (one per run): p50 over the repetitions
that succeeded, per count and side; counts not run say why. Usage: report.py RESULTS.jsonl"""
import json
import statistics
import sys
from collections import defaultdict

SIDES = ("ours", "peer", "torchrun")


def p50(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=2):
    return "–" if v is None else f"{v:.{digits}f}"


def main():
    runs = defaultdict(list)
    for line in open(sys.argv[1]):
        line = line.strip()
        if line:
            r = json.loads(line)
            runs[(r["n"], r["side"])].append(r)
    counts = sorted({n for n, _ in runs})

    def cell(n, side, key, digits=2):
        ok = [r for r in runs.get((n, side), []) if r.get("ok")]
        if ok:
            return p50([r.get(key) for r in ok])
        return None

    def why(n, side):
        rs = runs.get((n, side), [])
        if not rs:
            return "not run"
        if any(r.get("ok") for r in rs):
            return None
        r = rs[-1]
        if "not_run" in r:
            return "not run: " + r["not_run"]
        return "failed: " + (r.get("aborted") or r.get("error") or f"{r.get('failed_ranks')} ranks exited non-zero")

    print("### Time (seconds from the start of the first process; p50 of the runs that passed)")
    print()
    print("wall: until every rank exited. first line: rank 0's first line, printed after the same")
    print("15 checked collectives and a barrier on both sides. ours rdzv: every rank's host key in")
    print("rank 0's store. peer init / 1st AR: rank 0's own clock after init_process_group and after")
    print("its first all-reduce. ratio: peer (or torchrun) wall / ours (above 1: ours faster).")
    print()
    print("| ranks | runs ours/peer/torchrun | ours wall | peer wall | torchrun wall | ours first line"
          " | peer first line | torchrun first line | ours rdzv | peer init | peer 1st AR"
          " | ratio peer/ours | ratio torchrun/ours |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []
    for n in counts:
        nruns = "/".join(str(sum(1 for r in runs.get((n, s), []) if r.get("ok"))) for s in SIDES)
        w = {s: cell(n, s, "wall_s") for s in SIDES}
        f = {s: cell(n, s, "first_line_s") for s in SIDES}
        ratio_p = w["peer"] / w["ours"] if w["peer"] and w["ours"] else None
        ratio_t = w["torchrun"] / w["ours"] if w["torchrun"] and w["ours"] else None
        print(f"| {n} | {nruns} | {fmt(w['ours'])} | {fmt(w['peer'])} | {fmt(w['torchrun'])}"
              f" | {fmt(f['ours'])} | {fmt(f['peer'])} | {fmt(f['torchrun'])}"
              f" | {fmt(cell(n, 'ours', 'rendezvous_s'))} | {fmt(cell(n, 'peer', 'peer_rank0_init_s'))}"
              f" | {fmt(cell(n, 'peer', 'peer_rank0_first_all_reduce_s'))}"
              f" | {fmt(ratio_p)} | {fmt(ratio_t)} |")
        for s in SIDES:
            reason = why(n, s)
            if reason and (n, s) in runs:
                notes.append(f"- {n} ranks, {s}: {reason}")
    if notes:
        print()
        print("\n".join(notes))
    print()
    print("### Memory and threads per rank (p50 of the runs that passed)")
    print()
    print("PSS: the rank's share of memory (shared pages divided among the processes mapping them),")
    print("read from smaps_rollup of every rank when rank 0's first line came; anon: its private")
    print("heap and data; peak RSS: wait4's ru_maxrss (counts shared library pages in full);")
    print("threads: the most rank 0 had (ours, peer: sampled; torchrun: at the end).")
    print()
    print("| ranks | ours PSS MiB | peer PSS MiB | torchrun PSS MiB | ours anon MiB | peer anon MiB"
          " | ours peak RSS MiB | peer peak RSS MiB | ours threads | peer threads | torchrun threads"
          " | all ranks PSS GiB ours/peer |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for n in counts:
        tot = [cell(n, s, "pss_total_mb") for s in ("ours", "peer")]
        print(f"| {n} | {fmt(cell(n, 'ours', 'pss_per_rank_mb'), 0)}"
              f" | {fmt(cell(n, 'peer', 'pss_per_rank_mb'), 0)}"
              f" | {fmt(cell(n, 'torchrun', 'pss_per_rank_mb'), 0)}"
              f" | {fmt(cell(n, 'ours', 'anon_per_rank_mb'), 0)}"
              f" | {fmt(cell(n, 'peer', 'anon_per_rank_mb'), 0)}"
              f" | {fmt(cell(n, 'ours', 'maxrss_mb_p50'), 0)} | {fmt(cell(n, 'peer', 'maxrss_mb_p50'), 0)}"
              f" | {fmt(cell(n, 'ours', 'threads'), 0)} | {fmt(cell(n, 'peer', 'threads'), 0)}"
              f" | {fmt(cell(n, 'torchrun', 'threads'), 0)}"
              f" | {'/'.join(fmt(t / 1024 if t else None, 1) for t in tot)} |")
    cpu_table(counts, cell)


def cpu_table(counts, cell):
    print()
    print("### CPU seconds per rank (user + system; p50 of the runs that passed)")
    print()
    print("N ranks share this machine's cores, so the wall times above include waiting for a core;")
    print("CPU time does not. What grows with N here is work each rank does per peer (Gloo's full")
    print("mesh, the rendezvous poll) or, for rank 0, the store it serves.")
    print()
    print("| ranks | ours median rank | ours rank 0 | ours all ranks | peer median rank | peer rank 0"
          " | peer all ranks | torchrun median rank | torchrun all ranks |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in counts:
        print(f"| {n} | {fmt(cell(n, 'ours', 'cpu_s_p50'))} | {fmt(cell(n, 'ours', 'cpu_s_rank0'))}"
              f" | {fmt(cell(n, 'ours', 'cpu_s_total'), 1)} | {fmt(cell(n, 'peer', 'cpu_s_p50'))}"
              f" | {fmt(cell(n, 'peer', 'cpu_s_rank0'))} | {fmt(cell(n, 'peer', 'cpu_s_total'), 1)}"
              f" | {fmt(cell(n, 'torchrun', 'cpu_s_p50'))} | {fmt(cell(n, 'torchrun', 'cpu_s_total'), 1)} |")


if __name__ == "__main__":
    main()
