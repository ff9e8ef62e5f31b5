#!/usr/bin/env bash
# A worker that exits with the "requeue me" status (75) is requeued by the supervisor; the second
# attempt runs with SLURM_RESTART_COUNT=1, the log keeps both attempts, the ledger has two lines.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec requeue requeue-once)
id=$(submit "$spec")
run=$work/requeue
wait_for 180 "second attempt" test -e "$run/payload-rank0-restart1"
wait_state "$run" COMPLETED 60
log=$run/logs/slurm-$id.out
grep -q "attempt 1 on" "$log" || fail "log lacks attempt 1"
grep -q "attempt 2 on" "$log" || fail "log lacks attempt 2: the log was not appended"
grep -q "payload rank 0 of 2, restart 1" "$log" || fail "attempt 2 did not see SLURM_RESTART_COUNT=1"
[[ $(wc -l < "$run/attempts.jsonl") == 2 ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
[[ $(ledger_field "$run" 1 reason) == requeued ]] || fail "ledger line 1 reason"
[[ $(ledger_field "$run" 1 exit_status) == 75 ]] || fail "ledger line 1 status"
[[ $(ledger_field "$run" 1 restart) == 0 ]] || fail "ledger line 1 restart"
[[ $(ledger_field "$run" 2 reason) == completed ]] || fail "ledger line 2 reason"
[[ $(ledger_field "$run" 2 restart) == 1 ]] || fail "ledger line 2 restart"
[[ $("$HPCTRAIN" status --json "$run" | jq -r .restarts) == 1 ]] || fail "status restarts"
echo "ok"
