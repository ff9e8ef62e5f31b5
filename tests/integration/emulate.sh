#!/usr/bin/env bash
# The many-rank emulator (bench/scale/emulate.sh) at 512 ranks, 8 to a node, heartbeat timeout
# 3 s: the protocol's operation counts, not its speed. Every rank joins in exactly 3 store
# operations (set its host, count itself in, wait for the outcome) plus the last arrival's 2: a
# poll or a host list read back would add to it. In steady state the store sees the nodes' leaders
# only (2 operations a node a second, rank 0's one multi_get): well under one a rank. A rank gone
# silent is named, with its host and phase, by every other rank within the timeout + 10 s. The
# checkpoint commits with one node manifest per node: 2 files a rank (its own, its part manifest),
# one a node, the shared model and manifest.json, whose size does not grow with the nodes (the
# same within a few digits at 512 ranks as at 64).
#   emulate.sh BUILD_DIR
set -euo pipefail
build=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
keep=$(mktemp -d /var/tmp/hpctrain-emulate-test.XXXXXX)
trap 'rm -rf "$keep"' EXIT
COUNTS=512 PER_NODE=8 TIMEOUT=3 STEADY=4 KEEP=$keep "$root/bench/scale/emulate.sh" "$build" >/dev/null
python3 - "$keep/emulate.jsonl" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
n, nodes = r["ranks"], r["nodes"]
problems = []
def check(ok, what):
    if not ok:
        problems.append(what)
check(r["startup_ops"] == 4 * n + 2, f"start-up took {r['startup_ops']} store operations, not 4N + 2 = {4 * n + 2}")
check(r["ended_before_the_verdict"] == 0, f"{r['ended_before_the_verdict']} ranks ended before the planted silence")
check(r["steady_ops_per_s"] < 0.5 * n, f"{r['steady_ops_per_s']:.0f} store operations a second for {n} ranks on {nodes} nodes: not by node")
v = r["verdict"]
check(v["ranks_with_verdict"] == n - 1, f"{v['ranks_with_verdict']} of {n - 1} ranks had the verdict")
check(v["every_rank_s"] <= r["timeout_s"] + 10, f"the last verdict came after {v['every_rank_s']:.1f} s")
want = f"lost rank {v['silent_rank']} ({v['silent_host']}): no heartbeat for"
check(want in v["line_of_rank_1"] and ", last in " in v["line_of_rank_1"], f"rank 1's line: {v['line_of_rank_1']}")
c = r.get("checkpoint", {})
check(c.get("files") == 2 * n + nodes + 2, f"the step holds {c.get('files')} files, not 2N + nodes + 2 = {2 * n + nodes + 2}: {r.get('checkpoint_error', '')}")
b = r.get("checkpoint_baseline", {})
check(c.get("manifest_bytes", 1 << 30) <= b.get("manifest_bytes", 0) + 16, f"manifest.json is {c.get('manifest_bytes')} bytes at {n} ranks, {b.get('manifest_bytes')} at {b.get('ranks')}: it grows with the nodes")
if problems:
    print("FAIL: " + "; ".join(problems))
    print(json.dumps(r))
    sys.exit(1)
print(f"PASS: {n} ranks joined in {r['joined_last_s']:.1f} s with {r['startup_ops']} operations; "
      f"{r['steady_ops_per_s']:.0f} ops/s steady; every verdict in {v['every_rank_s']:.1f} s")
PY
