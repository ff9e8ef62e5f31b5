#!/usr/bin/env bash
# The divergence rollback on real worker processes (2 ranks, synthetic data, 2 epochs of 32 steps,
# a checkpoint every 5 steps, a log line every 4). A corrupt sample (HPCTRAIN_TEST_POISON_SAMPLE:
# the loss of each step whose batch holds it is NaN) is read once in each epoch:
#   rolled     the run rolls back twice and ends normally (exit 0): each rollback restores the
#              newest checkpoint before the offending log window, and training goes on after the
#              last offending step, the samples of every step between never trained (the sample
#              trace says so); metrics.jsonl has both rollback records, the log their lines
#   resumed    the same run stopped (SIGUSR2) between the two rollbacks and resumed ends on the
#              same weights, bitwise, and counts the second rollback as the run's second: the skip
#              and the count live in the checkpoint written right after the rollback
#   device     both again on the GPU's input path on the CPU with channels_last (the device
#              path's one-step-late agreement and fused optimizer)
#   static     both again with train.cuda_graphs: the static step's eager twin (the poison as a
#              device tensor, state copied back into the static tensors after each rollback's
#              restore) ends on the device path's weights, bitwise, its addresses checked across
#              the rollbacks
#   limit      resilience.max_rollbacks = 1: the second divergence stops every rank with exit 79
#              and says the run rolled back once already
#   nowhere    no checkpoint before the divergence: exit 79, saying there is none to roll back to
#   streak     fp16, six corrupt samples read in a row: the scaler's skip streak rolls back to the
#              checkpoint before the streak, not the one inside it
#   replay     resilience.replay_on_divergence at 3 ranks on this one node (each rank witnessed by
#              the next): with sound ranks every result agrees, the log says the loss itself
#              diverged and the run ends on the weights it ends on without the replay, bitwise; with
#              rank 1 computing wrong results (HPCTRAIN_TEST_FAULTY_RANK, its logits off by 1e-3)
#              the replay names rank 1 alone, every rank exits 78 (a node to let go), and
#              metrics.jsonl has the corrupt record the step supervisor replaces the node for
#   rollback.sh WORKER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"

# The corrupt sample: one that rank 0 reads at step 13 of a clean run and that epoch 1 reads again
# between steps 46 and 60, leaving room for a stop between the two rollbacks. (A trace line is
# "EPOCH STEPS-BEFORE SAMPLE...": step 13's batch is on the line of 12.)
spec clean
launch clean 2 "$work/clean.log"
finish
[[ $statuses == "0 0" ]] || fail "clean: exited '$statuses'"
poison=$(awk '
  FNR == 1 { file++ }
  file == 1 && $1 == 0 && $2 == 12 { for (i = 3; i <= NF; i++) candidate[$i] = 1 }
  file > 1 && $1 == 1 && $2 >= 45 && $2 < 60 { for (i = 3; i <= NF; i++) if ($i in candidate) { print $i; exit } }
  ' "$work/clean.log.trace.rank-0" "$work/clean.log.trace.rank-0" "$work/clean.log.trace.rank-1")
[[ -n $poison ]] || fail "clean: no sample of rank 0's step 13 is read again in epoch 1's steps 46-60"
clean_print=$(fingerprint "$work/clean.log")
echo "clean: weights $clean_print; the corrupt sample: $poison (step 13, and again in epoch 1)"

# check_rolled NAME ROLLBACKS [one]: the run's rollback records and what its traces show of them;
# with "one", the run was one attempt, whose trace must never read a step twice.
check_rolled() {
  local name=$1 want=$2 one=${3:-} log=$work/$1.log n step to from samples r
  n=$(jq -c 'select(.kind == "rollback")' "$work/$name/metrics.jsonl" | wc -l)
  [[ $n -eq $want ]] || fail "$name: $n rollback records in metrics.jsonl, want $want"
  while read -r step to from samples r; do
    # The checkpoint: the newest one (a multiple of 5) before the offending window.
    (( to % 5 == 0 && to < step && from == to + 1 )) ||
      fail "$name: rolled back from step $step to $to (skipping from $from): not a checkpoint before it"
    (( samples == (step - to) * 32 )) || fail "$name: $samples samples skipped for steps $from-$step"
    grep -q "rolled back to the checkpoint of step $to and skipped the $samples samples of steps $from-$step (rollback $r of" \
      "$log.rank0" || fail "$name: no log line for the rollback at step $step"
  done < <(jq -r 'select(.kind == "rollback") | "\(.step) \(.rolled_back_to) \(.skipped_from) \(.samples_skipped) \(.rollbacks)"' \
    "$work/$name/metrics.jsonl")
  # One attempt: every rank reads each step once, in order: after a rollback it goes on after the
  # last offending step; the steps since the checkpoint are not read again.
  if [[ -n $one ]]; then
    for rank in 0 1; do
      awk '$2 <= last { exit 1 } { last = $2 }' last=-1 "$log.trace.rank-$rank" ||
        fail "$name: rank $rank read a step twice or out of order (its sample trace)"
    done
  fi
  # The corrupt sample's last reading on each rank is in the last rollback's offending steps: no
  # step after the rollback trains it.
  local last_step
  last_step=$(jq -r 'select(.kind == "rollback") | .step' "$work/$name/metrics.jsonl" | tail -n 1)
  for rank in 0 1; do
    awk -v p="$poison" -v s="$last_step" '
      { for (i = 3; i <= NF; i++) if ($i == p) at = $2 + 1 }
      END { exit !(at == "" || at <= s) }' "$log.trace.rank-$rank" ||
      fail "$name: rank $rank trained the corrupt sample $poison after the rollback at step $last_step"
  done
  # Ends normally, the loss finite to the last line.
  [[ $(jq -r 'select(.kind == "train") | .step' "$work/$name/metrics.jsonl" | tail -n 1) == 64 ]] ||
    fail "$name: did not train to step 64"
  [[ $(jq -r 'select(.kind == "train") | .loss' "$work/$name/metrics.jsonl" | tail -n 1) != null ]] ||
    fail "$name: the last loss is not finite"
}

# rollback_step NAME K: the step of the run's K-th rollback.
rollback_step() { jq -r 'select(.kind == "rollback") | .step' "$work/$1/metrics.jsonl" | sed -n "$2p"; }

for path in host device static; do
  env=(HPCTRAIN_TEST_POISON_SAMPLE="$poison")
  keys=()
  if [[ $path != host ]]; then
    env+=(HPCTRAIN_GPU_PATH_ON_CPU=1)
    keys=(train.channels_last=true)
  fi
  [[ $path == static ]] && keys+=(train.cuda_graphs=true)
  spec "rolled-$path" "${keys[@]}"
  for kv in "${env[@]}"; do export "${kv?}"; done
  launch "rolled-$path" 2 "$work/rolled-$path.log"
  finish
  [[ $statuses == "0 0" ]] || fail "rolled-$path: exited '$statuses', want '0 0'"
  check_rolled "rolled-$path" 2 one
  rolled_print=$(fingerprint "$work/rolled-$path.log")
  [[ -n $rolled_print && $rolled_print != "$clean_print" ]] ||
    fail "rolled-$path: weights '$rolled_print' (the clean run's: $clean_print)"
  if [[ $path == device ]]; then
    device_print=$rolled_print
  elif [[ $path == static ]]; then
    [[ $rolled_print == "$device_print" ]] ||
      fail "rolled-static: weights $rolled_print, the device path's step $device_print"
    grep -qE "static step: the eager twin .* checked in [1-9][0-9]* steps" \
      "$work/rolled-$path.log.rank0" || fail "rolled-static: no static step, or no address checked"
  fi
  echo "rolled-$path: $(grep -h 'rolled back to the checkpoint' "$work/rolled-$path.log.rank0" | sed 's/^\[[^]]*\] //' | cut -c1-200)"

  # Stopped between the two rollbacks, resumed: the same weights.
  first=$(rollback_step "rolled-$path" 1)
  second=$(rollback_step "rolled-$path" 2)
  stop=$((first + 3))
  (( stop + 2 < second - 4 )) || fail "rolled-$path: rollbacks at steps $first and $second leave no room for a stop"
  spec "resumed-$path" "${keys[@]}"
  launch_to_stop "resumed-$path" 2 "$work/resumed-$path.log" "$stop"
  finish
  [[ $statuses == "75 75" ]] || fail "resumed-$path: the stopped attempt (want 75 75) exited '$statuses'"
  grep -q "stopping at step" "$work/resumed-$path.log.rank0" || fail "resumed-$path: did not stop"
  launch "resumed-$path" 2 "$work/resumed-$path.log"
  finish
  [[ $statuses == "0 0" ]] || fail "resumed-$path: the resumed attempt exited '$statuses'"
  check_rolled "resumed-$path" 2
  [[ $(jq -r 'select(.kind == "rollback") | .rollbacks' "$work/resumed-$path/metrics.jsonl" | tr '\n' ' ') == "1 2 " ]] ||
    fail "resumed-$path: the rollbacks are not counted 1, 2 across the attempts"
  resumed_print=$(fingerprint "$work/resumed-$path.log")
  [[ $resumed_print == "$rolled_print" ]] ||
    fail "resumed-$path: weights $resumed_print after the stop and resume, $rolled_print without"
  echo "resumed-$path: stopped at step $stop, resumed, weights $resumed_print as without the stop"
  for kv in "${env[@]}"; do unset "${kv%%=*}"; done
done

# The limit: the second divergence stops the run.
spec limit resilience.max_rollbacks=1
HPCTRAIN_TEST_POISON_SAMPLE=$poison launch limit 2 "$work/limit.log"
finish
[[ $statuses == "79 79" ]] || fail "limit: exited '$statuses', want '79 79'"
grep -q "hpctrain-worker ended: diverged (exit status 79): the loss diverged at step .*the run rolled back 1 times already (resilience.max_rollbacks = 1)" \
  "$work/limit.log.rank0" || fail "limit: no end line naming the limit"
[[ $(jq -c 'select(.kind == "rollback")' "$work/limit/metrics.jsonl" | wc -l) -eq 1 ]] ||
  fail "limit: not one rollback before the stop"

# Nowhere to roll back to: the corrupt sample at step 13, no checkpoint taken before it.
spec nowhere checkpoint.every_steps=20
HPCTRAIN_TEST_POISON_SAMPLE=$poison launch nowhere 2 "$work/nowhere.log"
finish
[[ $statuses == "79 79" ]] || fail "nowhere: exited '$statuses', want '79 79'"
grep -q "hpctrain-worker ended: diverged (exit status 79): .*no committed checkpoint before step 13 to roll back to" \
  "$work/nowhere.log.rank0" || fail "nowhere: no end line saying there is no checkpoint"

# fp16: six corrupt samples in a row (rank 0's of steps 13-18 in the clean run; one epoch, 8x8
# images, fp16 on the CPU) make the scaler skip six steps in a row, the limit: the verdict at step
# 18 rolls back to the checkpoint before the streak (10), not to the one saved inside it (15), whose
# loss scale is backed off three times; training ends normally, never reading those samples again.
streak=$(awk '$1 == 0 && $2 >= 12 && $2 <= 17 { print $3 }' "$work/clean.log.trace.rank-0" | paste -sd,)
[[ $streak =~ ^[0-9]+(,[0-9]+){5}$ ]] || fail "fp16: no samples of rank 0's steps 13-18 in the clean trace: '$streak'"
spec streak train.precision=fp16 data.synthetic_image_size=8 train.epochs=1 \
  train.log_every_steps=2 resilience.fp16_skip_limit=6
HPCTRAIN_FP16_ON_CPU=1 HPCTRAIN_TEST_POISON_SAMPLE=$streak launch streak 2 "$work/streak.log"
finish
[[ $statuses == "0 0" ]] || fail "streak: exited '$statuses', want '0 0'"
[[ $(awk '$1 == 0 && $2 >= 12 && $2 <= 17 { print $3 }' "$work/streak.log.trace.rank-0" | paste -sd,) == "$streak" ]] ||
  fail "streak: rank 0 did not read the corrupt samples at steps 13-18 (the clean run's order)"
read -r step to from scale_after < <(jq -rs '
  (map(select(.kind == "rollback")) | .[0]) as $r
  | [$r.step, $r.rolled_back_to, $r.skipped_from,
     (map(select(.kind == "train" and .step > $r.step)) | .[0].loss_scale)] | @tsv' \
  "$work/streak/metrics.jsonl")
[[ $(jq -c 'select(.kind == "rollback")' "$work/streak/metrics.jsonl" | wc -l) -eq 1 && $step == 18 ]] ||
  fail "streak: want one rollback, at step 18: $(jq -c 'select(.kind == "rollback")' "$work/streak/metrics.jsonl")"
(( to == 10 && from == 11 )) ||
  fail "streak: rolled back to the checkpoint of step $to (skipping from $from), not to 10, the one before the skip streak (13-18)"
grep -q "the loss scaler skipped every step for 6 steps in a row (through step 18.*rolled back to the checkpoint of step 10 and skipped the 256 samples of steps 11-18" \
  "$work/streak.log.rank0" || fail "streak: no rollback line naming the skip streak"
scale_streak=$(jq -r 'select(.kind == "train" and .step == 18) | .loss_scale' "$work/streak/metrics.jsonl" | tail -n 1)
python3 -c "import sys; sys.exit(not float(sys.argv[1]) >= 16 * float(sys.argv[2]))" "$scale_after" "$scale_streak" ||
  fail "streak: the loss scale after the rollback is $scale_after, the streak's backed-off $scale_streak"
for rank in 0 1; do
  awk -v p=",$streak," '{ for (i = 3; i <= NF; i++) if (index(p, "," $i ",") && $2 >= 18) exit 1 }' \
    "$work/streak.log.trace.rank-$rank" || fail "streak: rank $rank read a corrupt sample after the rollback"
done
[[ $(jq -r 'select(.kind == "train") | .step' "$work/streak/metrics.jsonl" | tail -n 1) == 32 ]] ||
  fail "streak: did not train to step 32"
echo "streak: $(grep -h 'rolled back to the checkpoint' "$work/streak.log.rank0" | sed 's/^\[[^]]*\] //' | cut -c1-230); loss scale $scale_streak at the streak's end, $scale_after after"

# The replay, at 3 ranks: the corrupt sample of a clean run's step 9 (after the checkpoint of 5).
spec clean3 job.tasks_per_node=3
launch clean3 3 "$work/clean3.log"
finish
[[ $statuses == "0 0 0" ]] || fail "clean3: exited '$statuses'"
poison3=$(awk '$1 == 0 && $2 == 8 {print $3; exit}' "$work/clean3.log.trace.rank-0")
[[ -n $poison3 ]] || fail "clean3: no batch of step 9 in rank 0's trace"
for name in plain3 replay3 faulty3; do
  spec "$name" job.tasks_per_node=3 "$([[ $name == plain3 ]] && echo resilience.replay_on_divergence=false || echo resilience.replay_on_divergence=true)"
done
HPCTRAIN_TEST_POISON_SAMPLE=$poison3 launch plain3 3 "$work/plain3.log"
finish
[[ $statuses == "0 0 0" ]] || fail "plain3: exited '$statuses'"
HPCTRAIN_TEST_POISON_SAMPLE=$poison3 launch replay3 3 "$work/replay3.log"
finish
[[ $statuses == "0 0 0" ]] || fail "replay3: exited '$statuses'"
grep -q "replay at step [0-9]*: steps [0-9-]*'s batches, recomputed on every rank and its witness from the checkpoint of step 5: every result agrees; the loss itself diverged" \
  "$work/replay3.log.rank0" || fail "replay3: no replay line saying every result agrees"
[[ $(fingerprint "$work/replay3.log") == "$(fingerprint "$work/plain3.log")" ]] ||
  fail "replay3: weights $(fingerprint "$work/replay3.log"), without the replay $(fingerprint "$work/plain3.log")"
check_rolled_count() { [[ $(jq -c 'select(.kind == "rollback")' "$work/$1/metrics.jsonl" | wc -l) -ge 1 ]]; }
check_rolled_count replay3 || fail "replay3: no rollback record"
echo "replay3: $(grep -h 'replay at step' "$work/replay3.log.rank0" | sed 's/^\[[^]]*\] //')"
HPCTRAIN_TEST_POISON_SAMPLE=$poison3 HPCTRAIN_TEST_FAULTY_RANK=1 launch faulty3 3 "$work/faulty3.log"
finish
[[ $statuses == "78 78 78" ]] || fail "faulty3: exited '$statuses', want '78 78 78' (a node to let go)"
evict=$(jq -c 'select(.kind == "corrupt")' "$work/faulty3/metrics.jsonl")
[[ $(jq -c '.ranks' <<< "$evict") == "[1]" ]] || fail "faulty3: the evict record names ranks $(jq -c '.ranks' <<< "$evict"), not [1]"
jq -r '.message' <<< "$evict" | grep -q "^silent data corruption: rank 1 computed other results than its witnesses" ||
  fail "faulty3: the evict record's message: $(jq -r '.message' <<< "$evict")"
[[ $(jq -c 'select(.kind == "rollback")' "$work/faulty3/metrics.jsonl" | wc -l) -eq 0 ]] ||
  fail "faulty3: rolled back instead of letting the node go"
echo "faulty3: $(jq -r '.message' <<< "$evict")"
echo "rollback: two rollbacks and a normal end on both input paths, bitwise across a stop; the limit and no checkpoint stop with exit 79; the replay tells a faulty rank from a diverged loss"
