"""The emulator's JSON lines (bench/scale/emulate.sh) as a Markdown table, one row per run."""
import json
import sys


def row(r):
    v = r.get("verdict", {})
    c = r.get("checkpoint", {})
    b = r.get("checkpoint_baseline", {})
    ratio = c.get("commit_s", 0) / b["commit_s"] if b.get("commit_s") else float("nan")
    return (f"| {r['ranks']} | {r['nodes']} | {r['joined_last_s']:.1f} | {r['startup_ops']} "
            f"| {r['startup_store_cpu_s']:.1f} | {r['steady_ops_per_s']:.0f} "
            f"| {r['steady_keys_per_s']:.0f} | {100 * r['steady_store_cpu']:.1f} "
            f"| {r['watch_round_p50_ms']:.1f} / {r['watch_round_max_ms']:.1f} "
            f"| {v.get('every_rank_s', float('nan')):.1f} ({r['timeout_s']}) "
            f"| {v.get('ranks_with_verdict', '-')} | {100 * v.get('store_cpu', float('nan')):.1f} "
            f"| {c.get('commit_s', float('nan')) * 1000:.1f} | {c.get('files', '-')} "
            f"| {b.get('commit_s', float('nan')) * 1000:.1f} | {ratio:.2f} "
            f"| {c.get('retire_max_s', float('nan')):.2f} "
            f"| {r['peak_mib']:.0f} / {r['store_peak_mib']:.0f} |")


print("| ranks | nodes | joined s | start-up store ops | start-up store CPU s "
      "| steady store ops/s | keys read/s | store CPU % | watch round p50/max ms "
      "| verdict s (timeout) | ranks with verdict | store CPU % meanwhile | commit ms | files "
      "| commit ms at baseline | ratio | retired step removed s (off the commit's path) "
      "| peak MiB (emulator / store) |")
print("|" + "---:|" * 18)
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        print(row(json.loads(line)))
