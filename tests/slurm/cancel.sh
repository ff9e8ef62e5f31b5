#!/usr/bin/env bash
# hpctrain cancel ends a running job; the supervisor records the attempt as terminated.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec cancel wait-for-go)
id=$(submit "$spec")
run=$work/cancel
wait_state "$run" RUNNING 60
# Slurm says RUNNING once the job has its nodes, before the batch script has started: cancel once
# both ranks run (the script is then waiting for the step). A TERM during the script's setup is
# sbatch_node_loss's "term" case.
for rank in 0 1; do
  wait_for 60 "rank $rank started" test -e "$run/payload-rank$rank-restart0"
done
"$HPCTRAIN" cancel "$run" || fail "hpctrain cancel"
wait_state "$run" CANCELLED 60
wait_for 30 "ledger line" test -s "$run/attempts.jsonl"
[[ $(ledger_field "$run" 1 reason) == terminated ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
echo "ok"
