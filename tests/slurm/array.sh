#!/usr/bin/env bash
# [sweep] becomes a job array: 3 tasks, each with its own directory, frozen spec, log and ledger,
# each running its own override.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec array sweep '[sweep]
max_parallel = 3
[sweep.params]
"train.optimizer.lr" = [0.01, 0.02, 0.04]')
id=$(submit "$spec")
run=$work/array
for t in 0 1 2; do wait_state "$run" COMPLETED 120 "$t"; done
values=()
for t in 0 1 2; do
  dir=$run/task-00$t
  [[ -f $dir/payload-rank0-restart0.lr ]] || fail "task $t did not run in $dir"
  values+=("$(cat "$dir/payload-rank0-restart0.lr")")
  [[ $(ledger_field "$dir" 1 reason) == completed ]] || fail "task $t ledger"
  [[ $(ledger_field "$dir" 1 job_id) == "${id}_$t" ]] || fail "task $t ledger job id"
  [[ -f $run/logs/slurm-${id}_$t.out ]] || fail "task $t log"
done
[[ ${values[*]} == "lr = 0.01 lr = 0.02 lr = 0.04" ]] || fail "overrides: ${values[*]}"
[[ $("$HPCTRAIN" status --json "$run" | jq '.tasks | length') == 3 ]] || fail "status tasks"
echo "ok"
