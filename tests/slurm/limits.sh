#!/usr/bin/env bash
# The requeue limits: a worker asking for a requeue past max_restarts, and a failing worker past
# max_consecutive_failures, end the job as FAILED without a requeue; a worker that asks for a
# requeue every time without ever committing a checkpoint is requeued once, then stopped by the
# no-progress breaker (max_attempts_without_progress = 2): requeued, no_progress, FAILED.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec limit requeue-always)
submit "$spec" --set preemption.max_restarts=0 >/dev/null
spec=$(write_spec failing fail)
submit "$spec" --set preemption.max_consecutive_failures=0 >/dev/null
spec=$(write_spec stuck requeue-always)
submit "$spec" --set preemption.max_attempts_without_progress=2 >/dev/null
wait_state "$work/limit" FAILED 60
wait_state "$work/failing" FAILED 60
wait_state "$work/stuck" FAILED 120
reasons=$(jq -r .reason "$work/stuck/attempts.jsonl" | paste -sd ' ')
[[ $reasons == "requeued no_progress" ]] || fail "stuck: ledger reasons '$reasons'"
[[ $(ledger_field "$work/stuck" 2 exit_status) == 75 ]] || fail "stuck status"
grep -q '2 attempts in a row ended without a new committed checkpoint' "$work"/stuck/logs/* \
  || fail "stuck: the log does not say why"
[[ $(ledger_field "$work/limit" 1 reason) == restart_limit ]] || fail "limit ledger"
[[ $(ledger_field "$work/limit" 1 exit_status) == 75 ]] || fail "limit status"
[[ $(ledger_field "$work/failing" 1 reason) == failed ]] || fail "failing ledger"
[[ $(ledger_field "$work/failing" 1 exit_status) == 3 ]] || fail "failing status"
for run in limit failing; do
  [[ $(wc -l < "$work/$run/attempts.jsonl") == 1 ]] || fail "$run was requeued"
done
echo "ok"
