#!/usr/bin/env bash
# hpctrain cancel ends a running job; the script records the attempt as terminated.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec cancel wait-for-go)
id=$(submit "$spec")
run=$work/cancel
wait_state "$run" RUNNING 60
"$HPCTRAIN" cancel "$run" || fail "hpctrain cancel"
wait_state "$run" CANCELLED 60
wait_for 30 "ledger line" test -s "$run/attempts.jsonl"
[[ $(ledger_field "$run" 1 reason) == terminated ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
echo "ok"
