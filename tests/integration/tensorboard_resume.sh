#!/usr/bin/env bash
# TensorBoard event files over requeues (docs/tensorboard.md), with real worker processes (2
# ranks, torchrun's variables, no Slurm): a run stopped by SIGUSR2 (exit 75) and restarted, then
# killed with SIGKILL after it has logged steps and an evaluation past its last checkpoint (so the
# next attempt repeats them, in metrics.jsonl too), then restarted to the end. The tensorboard
# package's own reader (EventFileLoader, what TensorBoard itself uses) reads RUN_DIR/tensorboard
# and every scalar is compared with metrics.jsonl:
#   - each (tag, step) is there once, and every train and eval record of metrics.jsonl is there;
#   - its value is the float32 of the first metrics.jsonl record of that step, its wall_time that
#     record's (or a later record's, value and wall_time both, when the killed attempt died
#     between its metrics.jsonl line and its event: the first written wins);
#   - one file per attempt, each opening with the file-version event.
#   tensorboard_resume.sh WORKER HPCTRAIN_DATA PYTHON
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"
data=$2 python=$3
[[ -x $python ]] || fail "no Python at '$python'"

"$data" synthetic --samples 256 --size 16 --channels 3 --classes 10 -q -o "$work/val.h5" \
  > /dev/null || fail "making the validation set"
# spec(): 2 epochs of 32 steps, a train record every 4 steps; here an evaluation at each epoch's
# end (steps 32 and 64) and checkpoints at steps 25 and 50.
spec tb
sed -i "s|^synthetic = true|synthetic = true\nval = \"$work/val.h5\"|; s|^eval_every_epochs = 0|eval_every_epochs = 1|; s|^every_steps = 5|every_steps = 25|" \
  "$work/tb.toml"
run=$work/tb

# 1. Stopped before the first periodic checkpoint: exit 75 after checkpointing where it stopped.
launch_to_stop tb 2 "$work/a1.log" $((2 + RANDOM % 17))
finish
[[ $statuses == "75 75" ]] || fail "the stopped attempt exited '$statuses', want '75 75'"
stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/a1.log.rank0" | grep -oE '[0-9]+$')
(( stopped_at < 25 )) || fail "stopped at step $stopped_at, after the checkpoint at 25"

# 2. Restarted, then killed once it has evaluated at step 32: the checkpoint it resumes from next
# is step 25 (or its stop's), so steps 28, 32 and the evaluation at 32 are written again. The kill
# must come before the checkpoint at step 50, 18 steps (2 s on a loaded machine) after the
# evaluation: a poller late by that much saw the run resume from 50, repeating no evaluation. So
# rank 0 pauses 30 s (HPCTRAIN_TEST_STALL, below the hang watchdog's 60 s floor) as it begins step
# 34, the other waiting for it: the kill lands there however loaded the machine, and costs no time.
HPCTRAIN_TEST_STALL=0:33:data:30 launch tb 2 "$work/a2.log"
evaluated_at_32() { grep -qE '"kind":"eval".*"step":32[,}]' "$run/metrics.jsonl" 2>/dev/null; }
wait_for "$work/a2.log" 0 "the evaluation at step 32" evaluated_at_32
kill -9 "${pids[@]}"
finish
[[ " $statuses " != *" 0 "* && " $statuses " != *" 75 "* ]] || fail "the killed attempt exited '$statuses'"

# 3. Restarted to the end.
launch tb 2 "$work/a3.log"
finish
[[ $statuses == "0 0" ]] || fail "the last attempt exited '$statuses'"
resumed=$(grep -ohE 'resuming from checkpoint step [0-9]+' "$work/a3.log.rank0" | grep -oE '[0-9]+$')
[[ -n $resumed ]] || fail "the last attempt did not resume"
(( resumed == 25 )) || fail "the last attempt resumed from step $resumed, not 25: the kill came late"
echo "stopped at step $stopped_at, killed after the evaluation at 32, resumed from $resumed"
grep -h 'tensorboard:' "$work"/a?.log.rank0

"$python" - "$run" <<'PY' || fail "the event files do not match metrics.jsonl"
import glob, json, os, struct, sys

from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.util import tensor_util

run = sys.argv[1]
def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

tags = {"train": {"loss": "train/loss", "lr": "train/lr", "images_per_s": "train/images_per_s",
                  "loss_scale": "train/loss_scale"},
        "eval": {"top1": "eval/top1", "top5": "eval/top5", "loss": "eval/loss"}}
records = {}  # (tag, step) -> [(value, wall_time)], in metrics.jsonl's order
with open(f"{run}/metrics.jsonl") as f:
    for line in f:
        r = json.loads(line)
        for key, tag in tags.get(r["kind"], {}).items():
            records.setdefault((tag, r["step"]), []).append((r[key], r["wall_time"]))

problems = []
seen = {}  # (tag, step) -> [(value, wall_time, file)]
files = sorted(glob.glob(f"{run}/tensorboard/*tfevents*"))
if len(files) != 3:
    problems.append(f"{len(files)} event files for 3 attempts: {files}")
for path in files:
    events = list(EventFileLoader(path).Load())
    if not events or events[0].file_version != "brain.Event:2":
        problems.append(f"{path}: the first event is not the file version")
    for e in events:
        for v in e.summary.value:
            value = (v.simple_value if v.HasField("simple_value")
                     else tensor_util.make_ndarray(v.tensor).item())
            seen.setdefault((v.tag, e.step), []).append((value, e.wall_time, os.path.basename(path)))

repeated = sorted(k for k, rs in records.items() if len(rs) > 1)
if not any(t.startswith("train/") for t, _ in repeated) or not any(
        t.startswith("eval/") for t, _ in repeated):
    problems.append(f"metrics.jsonl repeats no train or no eval step ({repeated}): nothing to skip")
for key in sorted(set(records) - set(seen)):
    problems.append(f"{key[0]} at step {key[1]} is in metrics.jsonl but in no event file")
for key in sorted(set(seen) - set(records)):
    problems.append(f"{key[0]} at step {key[1]} is in an event file but not in metrics.jsonl")
later = 0
for key in sorted(set(seen) & set(records)):
    tag, step = key
    if len(seen[key]) != 1:
        problems.append(f"{tag} at step {step} written {len(seen[key])} times: {seen[key]}")
        continue
    value, wall_time, name = seen[key][0]
    walls = [w for _, w in records[key]]
    if wall_time not in walls:
        problems.append(f"{tag} at step {step} ({name}): wall_time {wall_time!r} is none of "
                        f"metrics.jsonl's {walls}")
        continue
    # The first record's, unless the attempt that wrote it died before its event (then a later
    # attempt's: a train record's loss and images/s are over its own window since the resume).
    i = walls.index(wall_time)
    later += i > 0
    want = records[key][i][0]
    if value != f32(want):
        problems.append(f"{tag} at step {step} ({name}): {value!r}, metrics.jsonl has {want!r} "
                        f"(float32 {f32(want)!r})")
print(f"{len(seen)} (tag, step) points in {len(files)} files; metrics.jsonl repeats "
      f"{len(repeated)} of them; {later} written by a later attempt than the first record's")
for p in problems:
    print("  " + p)
sys.exit(1 if problems else 0)
PY
echo "tensorboard event files: ok"
