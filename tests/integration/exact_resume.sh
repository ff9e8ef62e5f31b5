#!/usr/bin/env bash
# Exact resume (docs/checkpoint-format.md), with real worker processes on this machine:
#  1. 2 ranks uninterrupted, then 2 ranks stopped by SIGUSR2 at a random step (mid-epoch
#     included), exit 75 after checkpointing, restarted with nothing changed: the final weights'
#     fingerprints are bitwise equal, and the restarted run resumed from the stop's checkpoint.
#  2. 4 ranks stopped at a random step, resumed on 2 ranks: finishes, and over both attempts
#     every sample of the interrupted epoch was read once: no sample twice, none skipped.
#  3. A finished run restarted exits 0 at once without training.
# With HPCTRAIN_GPU_PATH_ON_CPU=1 all of it runs on the GPU's path (train/device_input.hpp).
#   exact_resume.sh WORKER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"

# 1. uninterrupted vs stopped and resumed, 2 ranks.
spec straight
launch straight 2 "$work/straight.log"
finish; [[ $statuses == "0 0" ]] || fail "uninterrupted run"
want=$(fingerprint "$work/straight.log")
if [[ ${HPCTRAIN_GPU_PATH_ON_CPU:-} == 1 ]]; then
  grep -q "the device path (uint8 input" "$work/straight.log.rank0" \
    || fail "HPCTRAIN_GPU_PATH_ON_CPU=1 but the run did not take the device path"
fi
[[ -n $want ]] || fail "no fingerprint"
# A run trained in one attempt: the short form, its steps, epochs, time and rate.
grep -qE '\] final: ([^;]*images\); )?64 steps, 2 epochs in [0-9.]+ s, [0-9]+ images/s ' \
  "$work/straight.log.rank0" || fail "uninterrupted final line: $(grep 'final:' "$work/straight.log.rank0")"
grep -q 'this attempt' "$work/straight.log.rank0" && fail "an uninterrupted run spoke of an attempt"

spec stopped
sed -i "s|run_dir = .*|run_dir = \"$work/stopped\"|" "$work/stopped.toml"
signal_step=$((1 + RANDOM % 56))  # of 64: 2 epochs of 32 steps
launch_to_stop stopped 2 "$work/stopped.log" "$signal_step"
finish
[[ $statuses == "75 75" ]] || fail "stopped run exited '$statuses', want '75 75'"
stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/stopped.log.rank0" | grep -oE '[0-9]+$')
grep -q "checkpoint step $stopped_at committed" "$work/stopped.log.rank0" || fail "no checkpoint at the stop"
launch stopped 2 "$work/stopped.log"
finish; [[ $statuses == "0 0" ]] || fail "resumed run"
grep -q "resuming from checkpoint step $stopped_at " "$work/stopped.log.rank0" || fail "did not resume at $stopped_at"
got=$(fingerprint "$work/stopped.log")
echo "signalled at step $signal_step, stopped at step $stopped_at of 64; fingerprints: uninterrupted $want, resumed $got"
# The resumed attempt's figures are its own: its first and last step, its count, its time and
# rate, then the run's totals, labelled; its first log window starts where it resumed.
first=$((stopped_at + 1))
final=$(grep 'final:' "$work/stopped.log.rank0")
grep -qE "this attempt: steps $first-64 \($((64 - stopped_at))\) in [0-9.]+ s, [0-9]+ images/s .*; the run: 64 steps, 2 epochs" <<<"$final" \
  || fail "the resumed attempt's final line: $final"
window=$(sed -n '/resuming from checkpoint/,$p' "$work/stopped.log.rank0" | grep -m 1 -oE 'images/s [0-9]+ \(steps [0-9]+-[0-9]+\)')
[[ $window =~ \(steps\ $first- ]] || fail "the resumed attempt's first log window: '$window'"
jq -e -s --argjson f "$first" '(map(.kind) | rindex("started")) as $i | .[$i:]
    | map(select(.kind == "train"))[0] | .window_first_step == $f and .window_seconds > 0' \
  "$work/stopped/metrics.jsonl" > /dev/null || fail "metrics.jsonl: the resumed attempt's first window"
[[ $got == "$want" ]] || fail "resumed weights differ from the uninterrupted run's"

# 2. 4 ranks stopped, resumed on 2: every sample of the interrupted epoch once.
spec shrink
sed -i 's/^epochs = 2/epochs = 1/; s/^synthetic_samples = 1024/synthetic_samples = 2048/; s/^tasks_per_node = 2/tasks_per_node = 4/' "$work/shrink.toml"
launch_to_stop shrink 4 "$work/shrink.log" $((1 + RANDOM % 24))  # of 32 steps of 64 samples
finish
[[ $statuses == "75 75 75 75" ]] || fail "4-rank stop exited '$statuses'"
sed -i 's/^tasks_per_node = 4/tasks_per_node = 2/' "$work/shrink.toml"  # the world size may change
launch shrink 2 "$work/shrink2.log"
finish; [[ $statuses == "0 0" ]] || fail "2-rank resume"
grep -q "saved by 4 ranks, now 2" "$work/shrink2.log.rank0" || fail "no world-size change reported"
resumed_step=$(grep -ohE 'resuming from checkpoint step [0-9]+' "$work/shrink2.log.rank0" | grep -oE '[0-9]+$')
python3 - "$work/shrink.log.trace" "$work/shrink2.log.trace" "$resumed_step" <<'PY' || fail "samples of the interrupted epoch"
import glob, sys
first, second, resumed = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = []
# The 4-rank attempt up to the checkpoint it resumed from, then all of the 2-rank attempt.
for path in glob.glob(first + ".rank-*"):
    for line in open(path):
        f = line.split()
        if int(f[1]) < resumed:
            seen.extend(int(x) for x in f[2:])
for path in glob.glob(second + ".rank-*"):
    for line in open(path):
        seen.extend(int(x) for x in line.split()[2:])
dupes = len(seen) - len(set(seen))
print(f"4 -> 2 ranks: resumed at step {resumed}; {len(seen)} samples read, {dupes} twice")
# 2048 samples, batches of 16: the 4-rank part reads whole steps of 64, the 2-rank rest whole
# steps of 32, so at most 31 are left over at the end of the epoch (the drop tail policy).
sys.exit(1 if dupes or len(seen) < 2048 - 31 else 0)
PY

# 3. A finished run, restarted: nothing to do, exit 0 at once.
launch straight 2 "$work/again.log"
finish; [[ $statuses == "0 0" ]] || fail "restart of a finished run"
grep -q "finished already" "$work/again.log.rank0" || fail "a finished run trained again"
echo "exact resume: ok"
