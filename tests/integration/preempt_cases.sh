#!/usr/bin/env bash
# The preemption cases docs/preemption.md promises, with real worker processes (2 ranks):
#  1. a signal before the first periodic checkpoint: the ranks still checkpoint that step, exit 75,
#     and the restart resumes there;
#  2. two signals in a row: one stop, one checkpoint, exit 75;
#  3. a signal while an asynchronous save is being written: the save in flight is finished and
#     committed, then the stop's, exit 75;
#  4. a rank killed with SIGKILL while checkpoints are written and committed every step: the
#     survivor fails (not 0, not 75) naming the lost rank within the collective deadline, and a
#     restart resumes from a committed checkpoint;
# and in every case the restarted run ends with the uninterrupted run's weights, bitwise.
#   preempt_cases.sh WORKER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"

# case NAME KEY=VALUE...: a spec NAME like spec() with [checkpoint]/[train] keys replaced.
case_spec() {
  local name=$1; shift
  spec "$name"
  local kv
  for kv in "$@"; do sed -i "s|^${kv%%=*} = .*|${kv%%=*} = ${kv#*=}|" "$work/$name.toml"; done
  grep -q '^collective_timeout_s' "$work/$name.toml" ||
    sed -i 's/^\[train\]$/[train]\ncollective_timeout_s = 30/' "$work/$name.toml"
}

# resumes NAME: restarts NAME on 2 ranks, which must finish with the uninterrupted weights.
resumes() {
  launch "$1" 2 "$work/$1-again.log"
  finish
  [[ $statuses == "0 0" ]] || fail "$1: the restart exited '$statuses'"
  grep -q "resuming from checkpoint step" "$work/$1-again.log.rank0" || fail "$1: did not resume"
  [[ $(fingerprint "$work/$1-again.log") == "$want" ]] || fail "$1: weights differ after the resume"
}

wait_for_line() {  # wait_for_line FILE PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  until grep -qE "$2" "$1" 2>/dev/null; do
    (( SECONDS < deadline )) || fail "no '$2' in $1 within $3 s"
    sleep 0.1
  done
}

spec straight
launch straight 2 "$work/straight.log"
finish; [[ $statuses == "0 0" ]] || fail "uninterrupted run"
want=$(fingerprint "$work/straight.log")

# 1. Before the first periodic checkpoint (every 1000 steps: none would come).
case_spec early every_steps=1000
launch early 2 "$work/early.log"
wait_for_line "$work/early.log.rank0" 'step 4/64' 60
kill -USR2 "${pids[@]}"
finish
[[ $statuses == "75 75" ]] || fail "early: exited '$statuses'"
step=$(grep -oE 'stopping at step [0-9]+' "$work/early.log.rank0" | grep -oE '[0-9]+$')
grep -q "checkpoint step $step committed" "$work/early.log.rank0" || fail "early: no checkpoint"
resumes early
echo "1. a signal before the first checkpoint: stopped and saved at step $step, resumed: ok"

# 2. Two signals in a row.
case_spec twice
launch twice 2 "$work/twice.log"
wait_for_line "$work/twice.log.rank0" 'step 8/64' 60
kill -USR2 "${pids[@]}"; sleep 0.05; kill -USR2 "${pids[@]}"
finish
[[ $statuses == "75 75" ]] || fail "twice: exited '$statuses'"
[[ $(grep -c 'stopping at step' "$work/twice.log.rank0") == 1 ]] || fail "twice: stop lines"
grep -q "hpctrain-worker ended: preempted (exit status 75)" "$work/twice.log.rank0" ||
  fail "twice: rank 0 printed no preempted end line"
resumes twice
echo "2. two signals in a row: one stop, exit 75, resumed: ok"

# 3. During an asynchronous save (one is written in the background after every step).
case_spec async every_steps=1
sed -i 's/^\[checkpoint\]$/[checkpoint]\nasync = true/' "$work/async.toml"
launch async 2 "$work/async.log"
wait_for_line "$work/async.log.rank0" 'writing in the background' 60
wait_for_line "$work/async.log.rank0" 'step 8/64' 60
kill -USR2 "${pids[@]}"
finish
[[ $statuses == "75 75" ]] || fail "async: exited '$statuses'"
step=$(grep -oE 'stopping at step [0-9]+' "$work/async.log.rank0" | grep -oE '[0-9]+$')
grep -q "checkpoint step $step committed" "$work/async.log.rank0" || fail "async: stop not saved"
grep -q 'committed (.*in the background)' "$work/async.log.rank0" || fail "async: no background commit"
resumes async
echo "3. a signal during a background save: finished it, saved step $step, resumed: ok"

# 4. A rank killed while checkpoints are written and committed every step.
case_spec killed every_steps=1
launch killed 2 "$work/killed.log"
wait_for_line "$work/killed.log.rank0" 'step 8/64' 60
sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", r / 32767 }')"
started=$SECONDS
kill -KILL "${pids[1]}"
finish
survivor=${statuses%% *}  # rank 0's
[[ $survivor != 0 && $survivor != 75 ]] || fail "killed: the survivor exited $survivor"
elapsed=$((SECONDS - started))
(( elapsed <= 45 )) || fail "killed: the survivor took $elapsed s"
grep -qE 'rank 1' "$work/killed.log.rank0" || fail "killed: the survivor did not name rank 1"
resumes killed
echo "4. a rank killed during the commits: survivor exited $survivor in $elapsed s naming it; resumed from a committed step: ok"
echo "preemption cases: ok"
