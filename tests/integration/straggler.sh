#!/usr/bin/env bash
# The straggler report (docs/resilience.md "Stragglers") on 3 real worker processes: every log
# window, rank 0 writes each rank's busy time per step (its own work before it first waits for
# its peers: p50 and p95) to metrics.jsonl, and names the slowest rank when it is clearly behind.
#   slow   rank 2 sleeps 250 ms in every data wait (HPCTRAIN_TEST_STALL=2:every:data:0.25): it
#          is the slowest rank of every window after the first, its p50 at least 125 ms above the
#          others' (a 100 ms stall left too little room: under CI's load the others' p50 swelled to
#          91 ms in the last one-step window, right after a checkpoint, and rank 2's 138 ms was
#          47 ms above it), and the log names it ("straggler: rank 2 (host) ..."), as does the window's
#          record ("behind_rank": 2, what `hpctrain report` counts) and `hpctrain status`
#   even   no rank slowed: every window's verdict is the rule's (1.5 times the median and 5 ms
#          more) on that window's own figures, and the log names a straggler exactly where a
#          record does. How many windows name one is not asserted: 3 ranks on a loaded 2-core
#          machine really are uneven (with a build beside it, 2 of 5 windows had a rank 1.5 times
#          the median), and the rule itself is straggler_tests' (RankSpread.*).
#   straggler.sh WORKER PYTHON
source "$(dirname "$0")/resume_lib.sh" "$1"
python=$2

straggler_spec() {  # straggler_spec NAME
  spec "$1"
  sed -i "s/^tasks_per_node = 2/tasks_per_node = 3/" "$work/$1.toml"
  sed -i "s/^epochs = 2/epochs = 1/; s/^log_every_steps = 4/log_every_steps = 5/" "$work/$1.toml"
}

straggler_spec slow
HPCTRAIN_TEST_STALL="2:every:data:0.25" launch slow 3 "$work/slow.log"
finish
[[ $statuses == "0 0 0" ]] || fail "slow: exited '$statuses'"
"$python" - "$work/slow/metrics.jsonl" <<'PY' || fail "slow: rank 2 is not reported as the straggler"
import json, sys
windows = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "ranks"]
assert len(windows) >= 5, f"{len(windows)} windows of per-rank step times"
for w in windows[1:]:
    p50 = w["busy_p50_s"]
    assert len(p50) == 3 and len(w["busy_p95_s"]) == 3, w
    assert w["slowest_rank"] == 2, f"step {w['step']}: slowest {w['slowest_rank']}: {p50}"
    # Half the planted 250 ms at least: the others' own times swell on a busy machine.
    assert p50[2] - max(p50[0], p50[1]) >= 0.125, f"step {w['step']}: {p50}"
    assert w.get("behind_rank") == 2, f"step {w['step']}: no verdict on rank 2: {w}"
    assert all(a <= b for a, b in zip(p50, w["busy_p95_s"])), w
last = windows[-1]
print(f"slow: {len(windows)} windows; the last (step {last['step']}): busy p50 "
      + ", ".join(f"rank {r} {t * 1000:.1f} ms" for r, t in enumerate(last["busy_p50_s"])))
PY
grep -qE 'straggler: rank 2 \(.+\) busy [0-9]\.[0-9]{3} s a step' "$work/slow.log.rank0" \
  || fail "slow: the log does not name rank 2"
grep -m1 -oE 'straggler: .*' "$work/slow.log.rank0"
# hpctrain status names it too (the run directory as a submit leaves it: with its spec).
hpctrain=$(dirname "$1")/hpctrain
if [[ -x $hpctrain ]]; then
  cp "$work/slow.toml" "$work/slow/spec.toml"
  line=$("$hpctrain" status "$work/slow" | grep '^ranks:') || fail "slow: hpctrain status has no ranks line"
  [[ $line =~ slowest\ rank\ 2\ \(.+\),\ busy\ [0-9]+\.[0-9]\ ms ]] || fail "slow: status says '$line'"
  echo "status: $line"
fi

straggler_spec even
launch even 3 "$work/even.log"
finish
[[ $statuses == "0 0 0" ]] || fail "even: exited '$statuses'"
windows=$(grep -c '"kind":"ranks"' "$work/even/metrics.jsonl")
named=$(grep -c 'straggler:' "$work/even.log.rank0")
behind=$(grep -c '"behind_rank"' "$work/even/metrics.jsonl")
echo "even: a straggler named in $named of $windows windows, $behind records say one was behind"
(( behind == named )) || fail "even: $named lines name a straggler, $behind records"
(( windows >= 5 )) || fail "even: $windows windows of per-rank step times"
"$python" - "$work/even/metrics.jsonl" <<'PY' || fail "even: a verdict is not the rule's on its window's figures"
import json, sys
for w in (r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "ranks"):
    p50 = w["busy_p50_s"]
    median, slowest = sorted(p50)[len(p50) // 2], max(p50)
    margin = min(abs(slowest - 1.5 * median), abs(slowest - median - 0.005))
    if margin < 1e-4:
        continue  # on the line, within the figures' rounding
    behind = median > 0 and slowest > 1.5 * median and slowest - median > 0.005
    assert ("behind_rank" in w) == behind, f"step {w['step']}: {p50}: record {w.get('behind_rank')}"
    if behind:
        assert w["behind_rank"] == p50.index(slowest), w
PY
echo "straggler report: all cases passed"
