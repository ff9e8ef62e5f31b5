#!/usr/bin/env bash
# Every piece of state a checkpoint restores is proven to matter: a test fails without it.
#
# Three runs of 2 ranks, each stopped by SIGUSR2 at a random step in the middle of its second
# epoch and resumed:
#   alexnet  AlexNet (dropout: the per-rank random generators matter), fp32, SGD with momentum
#   fp16     CIFAR ResNet-20 (batch-norm buffers) in fp16 on the CPU (HPCTRAIN_FP16_ON_CPU), on 8x8
#            images (torch's emulated half on the CPU: 16x16 took 3.5 times as long here), with
#            the loss scale starting at 2^24 and a growth interval of 3 steps: steps overflow and
#            are skipped, the scale backs off, grows, backs off again, across the stop
#   localsgd CIFAR ResNet-20, fp32, local SGD (train.sync = "local_sgd", an averaging every 3
#            steps after 2 of all-reduce, the Nesterov outer step) stopped between two
#            averagings: each rank's own model and optimizer state and the outer state matter
# Each resumed run must end bitwise equal to its uninterrupted twin, and the fp16 run must log the
# same loss scale at every step after the resume. The worker lists the pieces of state it restored
# (HPCTRAIN_RESUME_PIECES: model.parameters, optimizer.momentum_buffer, scaler.scale, rng.cpu,
# position.consumed, ...): the table is generated from what the checkpoint holds, so a new piece
# is tested without anyone writing its test. For every piece, a copy of the stopped run resumes
# with that piece left out (HPCTRAIN_RESUME_SKIP, the bug planted on purpose); at least one of the
# two runs must then end with different weights, or the piece is untested and this test fails.
# The pieces' list is checked against the checkpoint's own files (read with torch): state that is
# saved but never restored fails too.
#   resume_ablation.sh WORKER PYTHON (the pinned torch wheel's)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$2
source "$here/resume_lib.sh" "$1"
export HPCTRAIN_FP16_ON_CPU=1 HPCTRAIN_FP16_INIT_SCALE=16777216 HPCTRAIN_FP16_GROWTH_INTERVAL=3

make_spec() {  # make_spec NAME RUN_DIR CONFIG
  local -a config
  if [[ $3 == alexnet ]]; then
    config=(model.arch=alexnet data.synthetic_samples=128 data.synthetic_image_size=64
            train.precision=fp32)
  elif [[ $3 == localsgd ]]; then
    config=(data.synthetic_samples=256 data.synthetic_image_size=16 train.precision=fp32
            train.sync=local_sgd train.sync_every_steps=3 train.sync_warmup_steps=2
            train.outer_optimizer=nesterov)
  else
    config=(data.synthetic_samples=256 data.synthetic_image_size=8 train.precision=fp16)
  fi
  synthetic_spec job.name="$1" job.tasks_per_node=2 job.run_dir="$2" "${config[@]}" \
    train.epochs=2 train.batch_size=8 train.threads=1 train.log_every_steps=1 \
    train.eval_every_epochs=0 train.optimizer.lr=0.02 checkpoint.every_steps=0 > "$work/$1.toml"
}

# stop_steps CONFIG STEPS_PER_EPOCH STRAIGHT_METRICS: the steps STEP in the second epoch (with
# room after it) for launch_to_stop, whose stop lands after step STEP + 1 or STEP + 2, where at
# both of those:
#   fp16      the scaler's growth tracker is not 0, and the scale's next change is a growth (a
#             backoff first would reset the tracker anyway): a resume without the tracker then logs
#             another scale at that step (the check below), whether or not its weights differ
#             (scales a power of two apart give the same gradients unless one overflows, so the
#             weights alone missed it in one run of 8x8 images). The tracker counts the steps since
#             the loss scale last changed (a backoff or a growth resets it), read off the
#             uninterrupted run's scale at every step, which the resumed run must repeat. A stop drawn at any step of the range
#             found the tracker at 0 about half the time (3 tries of 4 in one run under load), and
#             the test failed when six tries in a row did: about one run in 64.
#   localsgd  some local steps are taken since the last averaging (every 3 after 2 of all-reduce:
#             (step - 2) % 3 of them), and the next averaging comes before the last step.
stop_steps() {
  local config=$1 per_epoch=$2 step
  if [[ $config == fp16 ]]; then
    python3 - "$3" "$per_epoch" <<'PY'
import json, sys
per_epoch = int(sys.argv[2])
scale = {0: None}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "train":
        scale[r["step"]] = r["loss_scale"]
tracker = {0: 0}
for s in range(1, 2 * per_epoch + 1):
    tracker[s] = tracker[s - 1] + 1 if scale[s] == scale[s - 1] else 0
last = 2 * per_epoch
def next_change(s):  # the first step after s whose scale differs from its predecessor's
    return next((g for g in range(s + 1, last + 1) if scale[g] != scale[g - 1]), None)
def tracker_matters(s):
    g = next_change(s)
    return tracker[s] > 0 and g is not None and scale[g] > scale[g - 1]
for step in range(per_epoch + 1, last - 3):
    if tracker_matters(step + 1) and tracker_matters(step + 2):
        print(step)
PY
    return
  fi
  for ((step = per_epoch + 1; step <= 2 * per_epoch - 4; step++)); do
    if [[ $config == localsgd ]]; then
      local a=$(( (step - 1) % 3 )) b=$(( step % 3 ))  # local steps after step + 1, step + 2
      (( a > 0 && b > 0 && step + 1 + 3 - a < 2 * per_epoch && step + 2 + 3 - b < 2 * per_epoch )) \
        || continue
    fi
    echo "$step"
  done
}

# scale_check RESUMED_METRICS STOP: whether every step after STOP logged the loss scale the
# uninterrupted fp16 run logged; prints how many scale changes the run went through, or the first
# step that differs (and fails). The run must have gone through overflow and growth.
scale_check() {
  python3 - "$work/fp16-straight/metrics.jsonl" "$1" "$2" <<'PY'
import json, sys
def scales(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "train":
            out[r["step"]] = r["loss_scale"]
    return out
straight, resumed, stop = scales(sys.argv[1]), scales(sys.argv[2]), int(sys.argv[3])
seq = [straight[s] for s in sorted(straight)]
backoffs = sum(b < a for a, b in zip(seq, seq[1:]))
growths = sum(b > a for a, b in zip(seq, seq[1:]))
assert backoffs >= 3 and growths >= 1, "the scaler did not go through overflow and growth"
after = [s for s in sorted(straight) if s > stop]
differ = [s for s in after if resumed.get(s) != straight[s]]
if differ:
    print(f"loss scale at step {differ[0]}: {resumed.get(differ[0])}, not {straight[differ[0]]}")
    sys.exit(1)
print(f"fp16 loss scale: {backoffs} backoffs, {growths} growths over {len(seq)} steps; "
      f"steps {after[0]}..{after[-1]} after the resume: {len(after)} equal")
PY
}

declare -A pieces_of finger_of base_of stopped_of
configs=(alexnet fp16 localsgd)
for config in "${configs[@]}"; do
  steps_per_epoch=16
  [[ $config == alexnet ]] && steps_per_epoch=8
  make_spec "$config-straight" "$work/$config-straight" "$config"
  launch "$config-straight" 2 "$work/$config-straight.log"
  finish; [[ $statuses == "0 0" ]] || fail "$config: uninterrupted run exited '$statuses'"
  want=$(fingerprint "$work/$config-straight.log")
  finger_of[$config]=$want

  # A stop in the second epoch, with room for it to land a step or two later, still inside it:
  # launch_to_stop STEP ends the run after step STEP + 1 or STEP + 2 (which of the two is the
  # machine's timing). So STEP is drawn among those where both landings leave the state a resume
  # must carry away from its reset value (stop_steps), else leaving that piece out could not show.
  stop=$(stop_steps "$config" "$steps_per_epoch" "$work/$config-straight/metrics.jsonl" | shuf -n 1)
  [[ -n $stop ]] || fail "$config: no step to stop at (stop_steps found none)"
  make_spec "$config-stopped" "$work/$config-stopped" "$config"
  launch_to_stop "$config-stopped" 2 "$work/$config-stopped.log" "$stop"
  finish; [[ $statuses == "75 75" ]] || fail "$config: stopped run exited '$statuses', want '75 75'"
  stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/$config-stopped.log.rank0" | grep -oE '[0-9]+$')
  (( stopped_at > steps_per_epoch && stopped_at < 2 * steps_per_epoch )) \
    || fail "$config: stopped at step $stopped_at, not inside the second epoch"
  if [[ $config == localsgd ]]; then
    local_steps=$("$python" -c 'import sys, torch; print(torch.load(sys.argv[1], weights_only=True)["local_steps"].item())' \
      "$work/$config-stopped"/checkpoints/step-*"$stopped_at"/local_sgd.pt)
    echo "localsgd: signalled in step $((stop + 1)), stopped at step $stopped_at, $local_steps local steps after the last averaging"
    (( local_steps > 0 && stopped_at + 3 - local_steps < 2 * steps_per_epoch )) \
      || fail "localsgd: stopped at step $stopped_at with $local_steps local steps: not between averagings early enough"
  elif [[ $config == fp16 ]]; then
    tracker=$(jq .scaler.growth_tracker "$work/$config-stopped"/checkpoints/step-*"$stopped_at"/trainer.json)
    echo "fp16: signalled in step $((stop + 1)), stopped at step $stopped_at with the scaler's growth tracker at $tracker"
    (( tracker > 0 )) || fail "fp16: stopped at step $stopped_at with the growth tracker at 0"
  fi
  cp -a "$work/$config-stopped" "$work/$config-base"  # for the ablations below
  base_of[$config]=$work/$config-base
  stopped_of[$config]=$stopped_at

  HPCTRAIN_RESUME_PIECES=$work/$config.pieces launch "$config-stopped" 2 "$work/$config-stopped.log"
  finish; [[ $statuses == "0 0" ]] || fail "$config: resumed run exited '$statuses'"
  grep -q "resuming from checkpoint step $stopped_at " "$work/$config-stopped.log.rank0" \
    || fail "$config: did not resume at step $stopped_at"
  got=$(fingerprint "$work/$config-stopped.log")
  echo "$config: stopped at step $stopped_at of $((2 * steps_per_epoch)); uninterrupted $want, resumed $got"
  [[ $got == "$want" ]] || fail "$config: resumed weights differ from the uninterrupted run's"
  pieces_of[$config]=$(cat "$work/$config.pieces")
  [[ -n ${pieces_of[$config]} ]] || fail "$config: the resumed run listed no restored pieces"
  # What the checkpoint holds, read from its files with torch: every piece of it must be among
  # those restored (state saved and never put back is the bug the list itself would miss), and
  # every key of trainer.json either restored state or known metadata.
  "$python" - "$work/$config-base/checkpoints" "$work/$config.pieces" <<'PY' \
    || fail "$config: the checkpoint holds state that the restore does not put back"
import glob, json, os, sys, torch
step = sorted(glob.glob(os.path.join(sys.argv[1], "step-*")))[-1]
restored = set(open(sys.argv[2]).read().split())
held = set()
buffers = ("running_mean", "running_var", "num_batches_tracked")
for key in torch.load(f"{step}/model.pt", weights_only=True):
    held.add("model.buffers" if key.rsplit(".", 1)[-1] in buffers else "model.parameters")
for key in torch.load(f"{step}/optimizer.pt", weights_only=True):
    held.add("optimizer." + key.rsplit(".", 1)[-1])
for path in glob.glob(f"{step}/rng-rank-*.pt"):
    held.update("rng." + key for key in torch.load(path, weights_only=True))
# Local SGD: every rank's own model and optimizer state, and the outer state.
for path in glob.glob(f"{step}/local-rank-*.pt"):
    for key in torch.load(path, weights_only=True):
        kind, name = key.split(".", 1)
        if kind == "optimizer":
            held.add("local.optimizer")
        else:
            held.add("local.buffers" if name.rsplit(".", 1)[-1] in buffers else "local.parameters")
if os.path.exists(f"{step}/local_sgd.pt"):
    held.update("local_sgd." + key.split(".")[0]
                for key in torch.load(f"{step}/local_sgd.pt", weights_only=True))
trainer = json.load(open(f"{step}/trainer.json"))
# rollbacks: the divergence guard's count, which no weight depends on in a run that does not
# diverge; tests/integration/rollback.sh checks that a resume restores it.
metadata = {"format_version", "resume", "time", "world_size", "batch_size", "finished", "rollbacks"}
for key, value in trainer.items():
    if key in ("step", "epoch", "consumed"):
        held.add("position." + key)
    elif key == "scaler":
        held.update("scaler." + k for k in (value or {}))
    elif key not in metadata:
        held.add("trainer.json:" + key)
print(f"the checkpoint holds: {' '.join(sorted(held))}")
missing = held - restored
if missing:
    print(f"held but not restored: {' '.join(sorted(missing))}")
sys.exit(1 if missing else 0)
PY

  if [[ $config == fp16 ]]; then
    # The loss scale of every step after the resume equals the uninterrupted run's, and the run
    # went through overflow (backoff) and growth on both sides of the stop.
    scale_check "$work/fp16-stopped/metrics.jsonl" "$stopped_at" \
      || fail "fp16: the loss scale after the resume differs from the uninterrupted run's"
  fi
done

# The generated table: every piece either run restores, left out once.
all_pieces=$(printf '%s\n' "${pieces_of[@]}" | sort -u)
echo "pieces of state restored: $(tr '\n' ' ' <<<"$all_pieces")"
uncaught=()
for piece in $all_pieces; do
  caught=
  for config in "${configs[@]}"; do
    grep -qx "$piece" <<<"${pieces_of[$config]}" || continue
    dir=$work/$config-ablate-${piece//./-}
    cp -a "${base_of[$config]}" "$dir"
    make_spec "$config-ablate" "$dir" "$config"
    HPCTRAIN_RESUME_SKIP=$piece launch "$config-ablate" 2 "$dir.log"
    finish
    if [[ $statuses != "0 0" ]]; then
      # Caught too when the run itself finds the damage (the ranks' weights differ, say).
      why=$(grep -h 'disagree\|error\|Error' "$dir.log.rank0" | tail -n 1)
      [[ -n $why ]] || fail "$config without $piece: exited '$statuses' and said nothing"
      printf '  %-28s caught by %-8s (exited %s: %s)\n' "$piece" "$config" "$statuses" "${why:0:90}"
      caught=1
      break
    fi
    got=$(fingerprint "$dir.log")
    if [[ $got != "${finger_of[$config]}" ]]; then
      printf '  %-28s caught by %-8s (weights %s, not %s)\n' "$piece" "$config" "$got" "${finger_of[$config]}"
      caught=1
      break
    fi
    # fp16: the loss scale the run logs after the resume is checked too (scale_check).
    if [[ $config == fp16 ]] && ! why=$(scale_check "$dir/metrics.jsonl" "${stopped_of[$config]}"); then
      printf '  %-28s caught by %-8s (same weights, but the %s)\n' "$piece" "$config" "$why"
      caught=1
      break
    fi
    printf '  %-28s NOT caught by %s (same weights and loss scale without it)\n' "$piece" "$config"
  done
  [[ -n $caught ]] || uncaught+=("$piece")
done
(( ${#uncaught[@]} == 0 )) || fail "pieces of state no test misses when left out: ${uncaught[*]}"
echo "resume ablation: every restored piece is caught when left out"
