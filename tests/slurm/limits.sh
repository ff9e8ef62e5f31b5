#!/usr/bin/env bash
# The requeue limits: a worker asking for a requeue past max_restarts, and a failing worker past
# max_consecutive_failures, end the job as FAILED without a requeue.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec limit requeue-always)
submit "$spec" --set preemption.max_restarts=0 >/dev/null
spec=$(write_spec failing fail)
submit "$spec" --set preemption.max_consecutive_failures=0 >/dev/null
wait_state "$work/limit" FAILED 60
wait_state "$work/failing" FAILED 60
[[ $(ledger_field "$work/limit" 1 reason) == restart_limit ]] || fail "limit ledger"
[[ $(ledger_field "$work/limit" 1 exit_status) == 75 ]] || fail "limit status"
[[ $(ledger_field "$work/failing" 1 reason) == failed ]] || fail "failing ledger"
[[ $(ledger_field "$work/failing" 1 exit_status) == 3 ]] || fail "failing status"
for run in limit failing; do
  [[ $(wc -l < "$work/$run/attempts.jsonl") == 1 ]] || fail "$run was requeued"
done
echo "ok"
