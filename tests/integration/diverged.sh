#!/usr/bin/env bash
# The divergence guard on real worker processes (2 ranks, synthetic data):
#   fp32  train.optimizer.lr = 100000 (the README's run as a new user tried it), with
#         resilience.max_rollbacks = 0 (tests/integration/rollback.sh has the rollbacks): every rank stops
#         at the first log window whose loss is not finite, with exit status 79 and its end line
#         ("hpctrain-worker ended: diverged"), and no checkpoint is committed after a non-finite
#         loss (checkpoint.every_steps = 1: the save-time check, between log lines, catches it
#         first); metrics.jsonl keeps the window's loss
#   fp16  the same in fp16 on the CPU (HPCTRAIN_FP16_ON_CPU): the scaler skips every step, and
#         resilience.fp16_skip_limit = 6 stops the run once 6 steps in a row were skipped
#   calm  lr = 0.05: the run ends normally (exit 0), nothing is called diverged
#   diverged.sh WORKER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"

make() {  # make NAME KEY=VALUE...
  local name=$1
  shift
  synthetic_spec job.name="$name" job.tasks_per_node=2 job.run_dir="$work/$name" \
    data.synthetic_samples=256 data.synthetic_image_size=16 train.epochs=2 train.batch_size=8 \
    train.threads=1 train.log_every_steps=4 train.eval_every_epochs=0 "$@" > "$work/$name.toml"
}

# fp32: diverged at a log window or at a save, never a checkpoint of weights after a NaN loss.
make fp32 train.optimizer.lr=100000 train.precision=fp32 checkpoint.every_steps=1 \
  resilience.max_rollbacks=0
launch fp32 2 "$work/fp32.log"
finish
[[ $statuses == "79 79" ]] || fail "fp32: exited '$statuses', want '79 79'"
for r in 0 1; do
  grep -q "hpctrain-worker ended: diverged (exit status 79): the loss diverged at step" \
    "$work/fp32.log.rank$r" || fail "fp32: rank $r printed no end line"
done
verdict=$(grep -h "the loss diverged at step" "$work/fp32.log.rank0" | head -n 1)
echo "fp32: $verdict"
stopped_at=$(grep -oE 'diverged at step [0-9]+' <<< "$verdict" | grep -oE '[0-9]+$')
# Every committed checkpoint comes before the first non-finite loss the log recorded.
first_nan=$(jq -r 'select(.kind == "train" and (.loss == null)) | .window_first_step' \
  "$work/fp32/metrics.jsonl" | head -n 1)
newest=$(find "$work/fp32/checkpoints" -maxdepth 1 -name 'step-*' -printf '%f\n' 2>/dev/null |
  sort | tail -n 1 | grep -oE '[0-9]+$' | sed 's/^0*//')
echo "fp32: stopped at step $stopped_at; first window with a non-finite loss: ${first_nan:-none}; newest checkpoint: ${newest:-none}"
if [[ -n $first_nan ]]; then
  (( ${newest:-0} < first_nan )) || fail "fp32: checkpoint $newest is not before the window of step $first_nan"
else
  grep -q "not finite (found before the checkpoint of step $stopped_at" <<< "$verdict" ||
    fail "fp32: no non-finite window logged and the verdict is not the save-time check: $verdict"
  (( ${newest:-0} < stopped_at )) || fail "fp32: checkpoint $newest written at or after the stop"
fi

# fp16: the skip streak.
HPCTRAIN_FP16_ON_CPU=1 make fp16 train.optimizer.lr=100000 train.precision=fp16 \
  checkpoint.every_steps=0 train.log_every_steps=2 resilience.fp16_skip_limit=6
HPCTRAIN_FP16_ON_CPU=1 launch fp16 2 "$work/fp16.log"
finish
[[ $statuses == "79 79" ]] || fail "fp16: exited '$statuses', want '79 79'"
verdict=$(grep -h "the loss diverged at step" "$work/fp16.log.rank0" | head -n 1)
echo "fp16: $verdict"
grep -q "skipped every step for [0-9]* steps in a row" <<< "$verdict" ||
  fail "fp16: not the skip verdict: $verdict"

# calm: no false alarm.
make calm train.optimizer.lr=0.05 checkpoint.every_steps=8
launch calm 2 "$work/calm.log"
finish
[[ $statuses == "0 0" ]] || fail "calm: exited '$statuses', want '0 0'"
! grep -q "diverged" "$work/calm.log.rank0" || fail "calm: called diverged"
echo "diverged: both verdicts, exit 79, no checkpoint after a NaN; a calm run untouched"
