#!/usr/bin/env bash
# The failure budget (docs/preemption.md): a failed attempt is requeued while fewer than
# preemption.max_consecutive_failures failed attempts immediately precede it in the ledger; a
# preempted attempt resets the count. Three jobs at once, each worker replaced by exit_sequence.sh:
#   recover  budget 3, fails twice then succeeds: failed_requeued, failed_requeued, completed
#   exhaust  budget 2, always fails: failed_requeued, failed_requeued, failed (the job FAILS)
#   reset    budget 1, fails, is preempted, fails: failed_requeued, requeued, failed_requeued
#            (without the reset the third attempt would end the job as failed); then cancelled.
source "$(dirname "$0")/lib.sh"

# start NAME BUDGET STATUSES: a job whose successive attempts exit with STATUSES.
start() {
  local spec
  spec=$(write_spec "$1" unused)
  submit "$spec" --set "job.worker=$here/exit_sequence.sh" \
    --set "preemption.max_consecutive_failures=$2" --set "job.env.EXIT_SEQUENCE=$3"
}

# expect_ledger RUN REASONS STATUSES: the ledger's reasons, exit statuses and restart counts.
expect_ledger() {
  local run=$1 reasons statuses restarts want_restarts
  reasons=$(jq -r .reason "$run/attempts.jsonl" | paste -sd ' ')
  statuses=$(jq -r .exit_status "$run/attempts.jsonl" | paste -sd ' ')
  restarts=$(jq -r .restart "$run/attempts.jsonl" | paste -sd ' ')
  want_restarts=$(seq 0 $(($(wc -w <<< "$2") - 1)) | paste -sd ' ')
  [[ $reasons == "$2" ]] || fail "$run: ledger reasons '$reasons', want '$2'"
  [[ $statuses == "$3" ]] || fail "$run: ledger exit statuses '$statuses', want '$3'"
  [[ $restarts == "$want_restarts" ]] || fail "$run: ledger restarts '$restarts'"
}

start recover 3 "3 3 0" >/dev/null
start exhaust 2 "3" >/dev/null
reset_id=$(start reset 1 "3 75 3 0")

ledger_lines() { [[ -f $1/attempts.jsonl && $(wc -l < "$1/attempts.jsonl") -ge $2 ]]; }
# Every first attempt fails within the budget: each job must be requeued, not end.
for run in recover exhaust reset; do
  wait_for 60 "first attempt of $run" ledger_lines "$work/$run" 1
  [[ $(ledger_field "$work/$run" 1 reason) == failed_requeued ]] ||
    fail "$run: a first failure within the budget was not requeued"
done
wait_for 200 "third attempt of reset" ledger_lines "$work/reset" 3
scancel "$reset_id"
expect_ledger "$work/reset" "failed_requeued requeued failed_requeued" "3 75 3"

wait_state "$work/recover" COMPLETED 200
expect_ledger "$work/recover" "failed_requeued failed_requeued completed" "3 3 0"
[[ -e $work/recover/attempt2-rank1 ]] || fail "recover: rank 1 did not run the third attempt"
[[ $("$HPCTRAIN" status --json "$work/recover" | jq -r .restarts) == 2 ]] || fail "status restarts"

wait_state "$work/exhaust" FAILED 200
expect_ledger "$work/exhaust" "failed_requeued failed_requeued failed" "3 3 3"
log=$work/exhaust/logs/slurm-$(jq -r .job_id "$work/exhaust/attempts.jsonl" | head -n 1).out
grep -q "attempt ended: status 3, failed (unknown)$" "$log" || fail "exhaust: log lacks the final failure"
echo "ok"
