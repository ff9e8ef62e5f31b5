#!/usr/bin/env bash
# The hang watchdog (docs/resilience.md "Hangs") on 3 real worker processes: a rank that stays
# alive (its heartbeat beats) but makes no progress, planted with HPCTRAIN_TEST_STALL, must be
# named with its host, phase and step by every rank within hang_timeout_s + 10 s, every rank must
# exit 77 (the others once the named rank's stacks are out), and the named rank must print its
# threads' stacks (gdb, where installed).
#   data       rank 1 sleeps entering the data wait of step 5: it is named "in data wait", the
#              others wait in the gradient all-reduce (its first bucket)
#   allreduce  rank 2 sleeps entering the gradient all-reduce's bucket wait of step 5, with its
#              peers alive and waiting: it is named "in all-reduce bucket 0"
#   none       no stall, a hang timeout of 2 s: a run whose steps are faster than that finishes
#              with 0 on every rank (the watchdog neither fires between steps nor at the end)
#   slow_save  rank 1's checkpoint takes twice the hang timeout, within the commit timeout: no
#              hang (a checkpoint gets the larger of the two)
#   slow_eval  an evaluation longer than twice the hang timeout, each of its batches shorter than
#              it: no hang (an evaluated batch is progress)
#   hang.sh WORKER DATA_TOOL
source "$(dirname "$0")/resume_lib.sh" "$1"
data=$2
timeout_s=4

hang_spec() {  # hang_spec NAME
  spec "$1"
  sed -i "s/^tasks_per_node = 2/tasks_per_node = 3/" "$work/$1.toml"
  sed -i "s/^epochs = 2/epochs = 4/" "$work/$1.toml"
  cat >> "$work/$1.toml" <<TOML
[resilience]
hang_timeout_s = $timeout_s
TOML
}

# stalled NAME RANK PHASE WANT: RANK stalls in PHASE at step 5; every rank must exit 77 within
# hang_timeout_s + 10 s of the stall, and say that RANK hangs in WANT.
stalled() {
  local name=$1 victim=$2 phase=$3 want=$4 r status start elapsed
  hang_spec "$name"
  HPCTRAIN_TEST_STALL="$victim:5:$phase:600" launch "$name" 3 "$work/$name.log"
  wait_for_step "$work/$name.log" 4 "$victim"
  start=$SECONDS
  # Every rank says the verdict once rank 0 has it; then the named rank prints its stacks (gdb
  # reading libtorch's symbols takes a while) and the others wait for that before they exit (srun
  # would end the named rank with them otherwise).
  until (( $(grep -l 'hang: no progress' "$work/$name".log.rank{0,1,2} 2>/dev/null | wc -l) == 3 )); do
    (( SECONDS - start <= timeout_s + 10 )) || break
    sleep 0.2
  done
  elapsed=$((SECONDS - start))
  (( elapsed <= timeout_s + 10 )) || fail "$name: the ranks took $elapsed s to name the hang (limit $((timeout_s + 10)))"
  for r in 0 1 2; do
    wait "${pids[$r]}"
    status=$?
    [[ $status == 77 ]] || fail "$name: rank $r exited $status, expected 77"
  done
  pids=()
  for r in 0 1 2; do
    grep -qE "hang: no progress for [0-9.]+ s \(hang timeout $timeout_s s\): rank $victim \(.+\) in $want at step 5 for" \
      "$work/$name.log.rank$r" || fail "$name: rank $r does not name rank $victim in $want at step 5"
  done
  grep -q 'stopping this rank (exit status 77)' "$work/$name.log.rank$victim" \
    || fail "$name: rank $victim's line"
  # Rank 0's record for the step supervisor, which treats the named rank's node as lost.
  jq -e -s --argjson r "$victim" 'map(select(.kind == "hang")) | length == 1 and .[0].ranks == [$r] and
      (.[0].hosts | length == 1) and .[0].step == 5 and (.[0].message | test("in '"$want"' at step 5"))' \
    "$work/$name/metrics.jsonl" > /dev/null || fail "$name: the hang record: $(grep hang "$work/$name/metrics.jsonl")"
  if command -v gdb > /dev/null; then
    grep -q 'the threads of this rank, as gdb sees them' "$work/$name.log.rank$victim" \
      || fail "$name: rank $victim printed no stacks"
    grep -qE '^#[0-9]+ .* in ' "$work/$name.log.rank$victim" \
      || fail "$name: rank $victim's stacks have no frames"
    for r in 0 1 2; do
      (( r == victim )) && continue
      ! grep -q 'the threads of this rank' "$work/$name.log.rank$r" \
        || fail "$name: rank $r, not named, printed its stacks"
    done
  fi
  echo "$name: rank $victim stalled in $phase at step 5; every rank named it after $elapsed s, all exited 77 after its stacks ($((SECONDS - start)) s):"
  grep -ohE 'hang: .*' "$work/$name.log.rank0" | head -n 1 | cut -c1-300
}

stalled data 1 data "data wait"
grep -qE 'the others wait: ranks 0, 2 in all-reduce bucket 0 at step 5' "$work/data.log.rank0" \
  || fail "data: rank 0 does not say where the others wait"
stalled allreduce 2 allreduce "all-reduce bucket 0"

# No stall: steps of a few milliseconds against a 2 s timeout, to the end.
timeout_s=2
hang_spec none
launch none 3 "$work/none.log"
finish
[[ $statuses == "0 0 0" ]] || fail "none: exited '$statuses', expected '0 0 0'"
! grep -q 'hang:' "$work"/none.log.rank* || fail "none: a hang was reported"
echo "none: no stall, hang_timeout_s = 2: all 3 ranks finished with 0"

# A save slower than the hang timeout but within checkpoint.commit_timeout_s is no hang: rank 1's
# checkpoint of step 5 takes 8 s (the others wait for it in the save's agreement) against a 4 s
# hang timeout and a 20 s commit timeout; the run finishes with 0 on every rank.
timeout_s=4
hang_spec slow_save
sed -i 's/^every_steps = 5$/every_steps = 5\ncommit_timeout_s = 20/' "$work/slow_save.toml"
sed -i 's/^epochs = 4$/epochs = 1/' "$work/slow_save.toml"  # 21 steps: the save of step 5 is the test
HPCTRAIN_TEST_STALL="1:5:checkpoint:8" launch slow_save 3 "$work/slow_save.log"
finish
! grep -h 'hang:' "$work"/slow_save.log.rank* || fail "slow_save: a slow save was called a hang"
[[ $statuses == "0 0 0" ]] || fail "slow_save: exited '$statuses', expected '0 0 0'"
save_s=$(grep -oE 'checkpoint step 5 committed \([0-9.]+ s' "$work/slow_save.log.rank0" | grep -oE '[0-9.]+ s$')
[[ -n $save_s ]] || fail "slow_save: step 5 not committed"
# The plant took effect: the save did outlast the hang timeout.
awk -v s="${save_s% s}" -v t="$timeout_s" 'BEGIN { exit !(s > t) }' ||
  fail "slow_save: step 5's save took $save_s, not longer than the hang timeout ($timeout_s s)"
echo "slow_save: rank 1's save took $save_s (hang timeout 4 s, commit timeout 20 s): no hang, all 3 ranks finished with 0"

# An evaluation is progress batch by batch: with a 2 s hang timeout, every rank's evaluation after
# epoch 1 (watched: mid-run) takes 9 batches of 0.6 s or more each (a stall before each batch),
# over twice the timeout in all; the run finishes with 0 on every rank and no hang.
timeout_s=2
"$data" synthetic --samples 432 --size 16 --channels 3 --classes 10 -q -o "$work/val.h5" \
  > /dev/null || fail "slow_eval: making the validation set"
hang_spec slow_eval
sed -i 's/^epochs = 4$/epochs = 2/; s/^eval_every_epochs = 0$/eval_every_epochs = 1/' "$work/slow_eval.toml"
sed -i "s|^synthetic = true|synthetic = true\nval = \"$work/val.h5\"|" "$work/slow_eval.toml"
HPCTRAIN_TEST_STALL="@$(hostname):every:eval-batch:0.6" launch slow_eval 3 "$work/slow_eval.log"
finish
! grep -h 'hang:' "$work"/slow_eval.log.rank* || fail "slow_eval: a long evaluation was called a hang"
[[ $statuses == "0 0 0" ]] || fail "slow_eval: exited '$statuses', expected '0 0 0'"
# The plant took effect: the evaluation after epoch 1 (the first eval record) outlasted twice the
# hang timeout.
eval_s=$(jq -s -r 'map(select(.kind == "eval")) | .[0].seconds // empty' "$work/slow_eval/metrics.jsonl")
[[ -n $eval_s ]] || fail "slow_eval: no evaluation recorded"
awk -v s="$eval_s" -v t="$timeout_s" 'BEGIN { exit !(s > 2 * t) }' ||
  fail "slow_eval: the evaluation took $eval_s s, not over twice the hang timeout ($timeout_s s)"
echo "slow_eval: the evaluation took $eval_s s (hang timeout 2 s): no hang, all 3 ranks finished with 0"

# A bad plant is refused by name, before any training.
hang_spec bad
HPCTRAIN_TEST_STALL="1:5:sleepy:3" launch bad 3 "$work/bad.log"
finish
[[ $statuses == "2 2 2" ]] || fail "bad: exited '$statuses', expected '2 2 2'"
grep -q 'unknown phase sleepy' "$work/bad.log.rank0" || fail "bad: the error does not name the phase"
echo "hang watchdog: all cases passed"
