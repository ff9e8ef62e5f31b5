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
# and checkpoint. Tracking (with PYTHON's mlflow; docs/tracking.md): the preempted run's spec
# names an MLflow server that is down during the first attempt (its push fails, said in the log,
# nothing else changes) and started while the second runs (whether the second and third
# attempts' pushes find it up depends on how fast it starts); once the run is over, hpctrain track
# from here completes the one MLflow run: every step of metrics.jsonl once, with its values,
# FINISHED, 3 attempts (tests/support/mlflow_check.py); a second push adds nothing.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/../support/synthetic_spec.sh"
: "${WORKER:?}"

spec() {  # spec NAME [KEY=VALUE...]
  local name=$1
  shift
  synthetic_spec job.name="$name" job.profile=local job.tasks_per_node=2 job.time=00:20:00 \
    job.run_dir="$work/{name}" job.worker="$WORKER" data.synthetic_samples=2048 \
    data.synthetic_image_size=16 train.epochs=1 train.batch_size=16 train.log_every_steps=4 \
    train.eval_every_epochs=0 checkpoint.every_steps=4 preemption.signal_lead_s=60 \
    preemption.max_restarts=5 "$@" > "$work/$name.toml"
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

# The tracking server: its address now, the server itself only during the second attempt.
tracked=
if [[ -n ${PYTHON:-} ]] && "$PYTHON" -c 'import mlflow' 2> /dev/null; then
  source "$here/../support/mlflow.sh"
  tracked=1
  reserve_port mlflow_port || fail "no port for the mlflow server"
  trap 'stop_mlflow; cleanup' EXIT
fi
spec straight
spec preempted ${tracked:+tracking.mlflow_uri=http://127.0.0.1:$mlflow_port tracking.experiment=preempt-$$}
straight_id=$(submit "$work/straight.toml")
id=$(submit "$work/preempted.toml")
run=$work/preempted

# 1. scontrol requeue once a checkpoint exists.
wait_state "$run" RUNNING 120
wait_for 180 "a committed checkpoint" committed_at_least "$run" 8
scontrol requeue "$id" || fail "scontrol requeue $id"
wait_for 120 "the second attempt" bash -c "grep -q 'attempt 2 on' '$run/logs/slurm-$id.out'"
if [[ -n $tracked ]]; then launch_mlflow "$PYTHON" "$work/mlflow" "$mlflow_port"; fi

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

# Tracking: the first attempt's push failed (the server was down); pushed from here once the
# server is up, the run is one MLflow run, whatever the supervisors of the later attempts sent.
if [[ -n $tracked ]]; then
  wait_mlflow
  grep -q "hpctrain: tracking: not pushed (.*127.0.0.1:$mlflow_port" "$err" ||
    fail "the first attempt's failed push is not in the log: $(grep tracking "$log" "$err")"
  pushed=$(grep -c '^hpctrain: tracking: mlflow run ' "$log" || true)
  "$HPCTRAIN" track "$run" > "$work/track.out" 2>&1 || fail "hpctrain track: $(cat "$work/track.out")"
  "$PYTHON" "$here/../support/mlflow_check.py" "$mlflow_uri" "preempt-$$" "$run" --status FINISHED \
    > "$work/mlflow-run.json" || fail "the MLflow run differs from the run directory"
  "$HPCTRAIN" track "$run" | grep -q ': 0 metric values sent, through step' ||
    fail "a second push sent again: $("$HPCTRAIN" track "$run" 2>&1)"
  echo "tracking: $pushed of 3 attempts pushed from the job; then $(cat "$work/track.out")"
  echo "MLflow run: $(jq -c '{info, tags, steps: (.metrics | map_values(length))}' "$work/mlflow-run.json")"
  stop_mlflow
fi

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
