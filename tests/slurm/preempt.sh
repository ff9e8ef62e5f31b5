#!/usr/bin/env bash
# Preemption end to end on the local cluster, with the real worker training (docs/preemption.md):
# a job submitted with `hpctrain submit` is
#   1. requeued from outside with `scontrol requeue` mid-training (the ranks are killed; the next
#      attempt resumes from the last committed checkpoint), then
#   2. sent `scancel --signal=USR2` mid-training (the ranks agree, checkpoint and exit 75; the
#      script requeues), then
#   3. left to finish.
# No manual step in between. Checked: the final weights equal an uninterrupted run's (bitwise:
# the fingerprints every rank prints), each attempt resumed where a committed checkpoint was,
# the log keeps every attempt, the ledger records terminated / requeued / completed, and
# hpctrain status shows the restarts and the last checkpoint, and its goodput ledger's parts sum
# to the wall time; hpctrain report's page of the run loads in a browser and draws every attempt
# and checkpoint.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/../support/synthetic_spec.sh"
: "${WORKER:?}"

spec() {  # spec NAME
  synthetic_spec job.name="$1" job.profile=local job.tasks_per_node=2 job.time=00:20:00 \
    job.run_dir="$work/{name}" job.worker="$WORKER" data.synthetic_samples=2048 \
    data.synthetic_image_size=16 train.epochs=1 train.batch_size=16 train.log_every_steps=4 \
    train.eval_every_epochs=0 checkpoint.every_steps=4 preemption.signal_lead_s=60 \
    preemption.max_restarts=5 > "$work/$1.toml"
}

fingerprints() {  # fingerprints LOG: the distinct final-weight fingerprints in LOG
  grep -ohE 'final weights fnv1a64 0x[0-9a-f]+' "$1" | awk '{print $NF}' | sort -u
}

# committed_at_least RUN N: a checkpoint at step >= N is committed.
committed_at_least() {
  local step
  step=$("$HPCTRAIN" status --json "$1" | jq -r '.last_checkpoint_step // -1')
  (( step >= $2 ))
}

spec straight
spec preempted
straight_id=$(submit "$work/straight.toml")
id=$(submit "$work/preempted.toml")
run=$work/preempted

# 1. scontrol requeue once a checkpoint exists.
wait_state "$run" RUNNING 120
wait_for 180 "a committed checkpoint" committed_at_least "$run" 8
scontrol requeue "$id" || fail "scontrol requeue $id"
wait_for 120 "the second attempt" bash -c "grep -q 'attempt 2 on' '$run/logs/slurm-$id.out'"

# 2. scancel --signal=USR2 once the second attempt has resumed and moved on.
wait_for 180 "the second attempt resuming" bash -c "grep -q 'resuming from checkpoint step' '$run/logs/slurm-$id.out'"
first_resume=$(grep -oE 'resuming from checkpoint step [0-9]+' "$run/logs/slurm-$id.out" | head -n 1 | grep -oE '[0-9]+$')
wait_for 180 "progress after the resume" committed_at_least "$run" $((first_resume + 4))
scancel --signal=USR2 "$id" || fail "scancel --signal=USR2 $id"
wait_for 120 "the third attempt" bash -c "grep -q 'attempt 3 on' '$run/logs/slurm-$id.out'"

# 3. both runs finish.
wait_state "$run" COMPLETED 300
wait_state "$work/straight" COMPLETED 300
log=$run/logs/slurm-$id.out
err=$run/logs/slurm-$id.err

# The ledger: killed from outside (terminated), stopped by the signal (requeued), completed.
reasons=$(jq -r .reason "$run/attempts.jsonl" | tr '\n' ' ')
[[ $reasons == "terminated requeued completed " ]] || fail "ledger reasons: $reasons"
[[ $(ledger_field "$run" 2 exit_status) == 75 ]] || fail "the signalled attempt did not exit 75"
for n in 1 2; do
  step=$(ledger_field "$run" "$n" last_step)
  [[ $step =~ ^[0-9]+$ ]] || fail "attempt $n: last_step '$step'"
done
# Each restart resumed from a committed checkpoint; the signal's attempt saved at its stop.
[[ $(grep -c 'resuming from checkpoint step' "$log") == 2 ]] || fail "resume lines: $(grep resuming "$log")"
stop_step=$(grep -oE 'stopping at step [0-9]+' "$log" | grep -oE '[0-9]+$')
grep -q "checkpoint step $stop_step committed" "$log" || fail "no checkpoint at the stop (step $stop_step)"
grep -q "resuming from checkpoint step $stop_step " "$log" || fail "the third attempt did not resume at $stop_step"
# The log keeps every attempt.
[[ $(grep -c '^hpctrain: job .* attempt [123] on' "$log") == 3 ]] || fail "attempt lines in the log"

# Final weights equal the uninterrupted run's, bitwise.
want=$(fingerprints "$work/straight/logs/slurm-$straight_id.err")
got=$(fingerprints "$err")
[[ $(wc -l <<<"$want") == 1 && -n $want ]] || fail "uninterrupted fingerprints: $want"
[[ $got == "$want" ]] || fail "preempted run's weights $got differ from the uninterrupted run's $want"

# hpctrain status: restarts and the last checkpoint.
status=$("$HPCTRAIN" status "$run")
grep -Eq '^attempts: +3 \(2 restarts\)' <<<"$status" || fail "status attempts: $status"
grep -Eq '^checkpoint: step [0-9]+' <<<"$status" || fail "status checkpoint: $status"

# The goodput ledger: the parts add up to the wall time; three attempts, each with training and
# the two interrupted ones followed by recovery; list shows it in a column.
goodput_adds_up "$run"
"$HPCTRAIN" status --json "$run" | jq -e '.goodput
  | .training_s > 0 and .recovery_s > 0 and .startup_s > 0 and (.attempts | length == 3)
    and ([.attempts[] | .training_s > 0] | all) and .fraction > 0 and .fraction < 1
    and .node_hours.total > 0' > /dev/null ||
  fail "goodput: $("$HPCTRAIN" status --json "$run" | jq -c .goodput)"
"$HPCTRAIN" list "$work" 2>/dev/null | head -n 1 | grep -q ' GOODPUT ' ||
  fail "list has no goodput column: $("$HPCTRAIN" list "$work" 2>&1)"
"$HPCTRAIN" list --json "$work" 2>/dev/null |
  jq -e '.runs[] | select(.name == "preempted") | .goodput.attempts | length == 3' > /dev/null ||
  fail "list --json has no goodput: $("$HPCTRAIN" list --json "$work" 2>&1)"

# hpctrain report on this preempted run: the page loads in headless Chromium without an error and
# shows every attempt, every committed checkpoint and one point per step (tests/report/).
source "$here/../report/page_lib.sh"
if [[ -n $(report_chromium) ]]; then
  report_check "$run" "${HPCTRAIN_ARTIFACTS:-$work/artifacts}/report-preempted.png" 1400x2400 ||
    fail "hpctrain report on the preempted run"
else
  echo "hpctrain report not checked in a browser: chromium not found (scripts/install-deps.sh)"
fi
echo "preempted at steps (requeue) and $stop_step (USR2); fingerprints equal: $got"
echo "ok"
