#!/usr/bin/env bash
# Why an attempt ended, recorded and acted on (docs/resilience.md "Why an attempt ended"), with the
# real worker on the local cluster, preemption on and max_consecutive_failures = 3 (a failure is
# retried while fewer than 3 failures precede it):
#   diverged   train.optimizer.lr = 100000: exit 79, cause diverged, stopped at once: one attempt,
#              the job FAILED, the batch log's last line says why and what to do
#   badinput   a data file that is not HDF5: exit 2, cause bad_input, stopped at once
#   retried    the same bad input with resilience.stop_on = []: requeued as before causes (the
#              old code did this for every failure): failed_requeued three times, then failed
#   completed  a short run: cause completed
#   cancelled  scancel while it trains: cause cancelled
# and status, list and the report show the cause.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/../support/synthetic_spec.sh"
: "${WORKER:?}"

spec() {  # spec NAME KEY=VALUE...
  local name=$1
  shift
  synthetic_spec job.name="$name" job.profile=local job.tasks_per_node=2 job.time=00:20:00 \
    job.run_dir="$work/{name}" job.worker="$WORKER" data.synthetic_samples=512 \
    data.synthetic_image_size=16 train.epochs=1 train.batch_size=16 train.log_every_steps=4 \
    train.eval_every_epochs=0 checkpoint.every_steps=4 preemption.max_consecutive_failures=3 \
    "$@" > "$work/$name.toml"
}
ended() { [[ $(state "$1") =~ ^(COMPLETED|FAILED|CANCELLED)$ ]]; }
causes() { jq -r '"\(.reason):\(.cause)"' "$1/attempts.jsonl" | paste -sd ' '; }

echo "not an HDF5 file" > "$work/junk.h5"
spec diverged train.optimizer.lr=100000
spec badinput -data.synthetic "data.train=[\"$work/junk.h5\"]"
spec retried -data.synthetic "data.train=[\"$work/junk.h5\"]" 'resilience.stop_on=[]'
spec completed
spec cancelled data.synthetic_samples=200000
for name in diverged badinput retried completed; do submit "$work/$name.toml" > /dev/null; done
cancel_id=$(submit "$work/cancelled.toml")

for name in diverged badinput; do
  wait_for 300 "end of $name" ended "$work/$name"
  [[ $(state "$work/$name") == FAILED ]] || fail "$name: job $(state "$work/$name"), want FAILED"
done
[[ $(causes "$work/diverged") == "failed:diverged" ]] ||
  fail "diverged: ledger '$(causes "$work/diverged")', want one attempt failed:diverged"
[[ $(ledger_field "$work/diverged" 1 exit_status) == 79 ]] || fail "diverged: exit status not 79"
[[ $(causes "$work/badinput") == "failed:bad_input" ]] ||
  fail "badinput: ledger '$(causes "$work/badinput")', want one attempt failed:bad_input"
ledger_field "$work/badinput" 1 evidence | grep -q "not a readable HDF5 file" ||
  fail "badinput: evidence '$(ledger_field "$work/badinput" 1 evidence)'"
last=$(tail -n 1 "$work"/diverged/logs/slurm-*.err)
[[ $last == "hpctrain: the run stopped: diverged ("*"not retried"*"What to do: lower train.optimizer.lr"* ]] ||
  fail "diverged: the job's last log line: $last"
echo "diverged: $last"
"$HPCTRAIN" status "$work/badinput" | grep -q "^ *last: *failed (bad_input), exit status 2" ||
  fail "status does not say bad_input: $("$HPCTRAIN" status "$work/badinput")"
"$HPCTRAIN" status "$work/badinput" | grep -q "^ *why: .*not a readable HDF5 file" ||
  fail "status has no why line"

wait_for 400 "end of retried" ended "$work/retried"
[[ $(causes "$work/retried") == "failed_requeued:bad_input failed_requeued:bad_input failed_requeued:bad_input failed:bad_input" ]] ||
  fail "retried: ledger '$(causes "$work/retried")'"
echo "retried (stop_on = []): $(causes "$work/retried")"

wait_for 300 "end of completed" ended "$work/completed"
[[ $(causes "$work/completed") == "completed:completed" ]] ||
  fail "completed: ledger '$(causes "$work/completed")'"

wait_for 300 "training of cancelled" bash -c "grep -qs '\"kind\":\"started\"' '$work/cancelled/metrics.jsonl'"
scancel "$cancel_id"
wait_for 120 "end of cancelled" ended "$work/cancelled"
wait_for 60 "the ledger of cancelled" test -s "$work/cancelled/attempts.jsonl"
[[ $(causes "$work/cancelled") == "terminated:cancelled" ]] ||
  fail "cancelled: ledger '$(causes "$work/cancelled")' ($(ledger_field "$work/cancelled" 1 evidence))"

listing=$("$HPCTRAIN" list "$work")
for pair in diverged:diverged badinput:bad_input retried:bad_input completed:completed cancelled:cancelled; do
  grep -Eq "^${pair%%:*} .* ${pair#*:} " <<< "$listing" || fail "list: ${pair%%:*} not ${pair#*:}: $listing"
done
"$HPCTRAIN" report "$work/diverged" -o "$work/report.html" > /dev/null || fail "report failed"
grep -q 'diverged' "$work/report.html" || fail "the report does not carry the cause"
echo "causes: diverged and bad input stopped at once, retried with stop_on = [], completed, cancelled"
