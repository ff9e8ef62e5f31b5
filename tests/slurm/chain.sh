#!/usr/bin/env bash
# Job chains (docs/preemption.md "Job chains"): where Slurm refuses `scontrol requeue` for a job
# (here the job's Requeue flag is switched off after submission, as a site's job_submit plugin or
# an administrator's policy leaves it; JobRequeue=0 does the same to jobs without --requeue), the
# worker's "requeue me" (75) makes the step supervisor submit the next job of a chain
# (--dependency=afterany:JOB), which runs as attempt 2 and completes. The ledger, submissions.jsonl
# and hpctrain status follow the run across the two job ids.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec chain go-then-requeue-once)
id=$(submit "$spec")
run=$work/chain
scontrol update JobId="$id" Requeue=0 || fail "scontrol update JobId=$id Requeue=0"
scontrol show job "$id" | grep -q 'Requeue=0' || fail "job $id is still requeueable"
wait_for 120 "the first attempt" test -e "$run/payload-rank0-restart0"
: > "$run/go"
wait_for 120 "the next job of the chain" \
  bash -c "[[ \$(jq -r .chained_from '$run/submissions.jsonl' | tail -n 1) == '$id' ]]"
next=$(jq -r .job_id "$run/submissions.jsonl" | tail -n 1)
[[ $next =~ ^[0-9]+$ && $next != "$id" ]] || fail "the chain's next job id is '$next'"
submitted+=("$next")
wait_for 180 "the chain's second attempt" test -e "$run/payload-rank0-restart1"
wait_state "$run" COMPLETED 120
grep -q "scontrol requeue $id was refused" "$run/logs/slurm-$id.err" ||
  fail "job $id's log does not say the requeue was refused"
grep -q "job $next continues the run once job $id has ended" "$run/logs/slurm-$id.out" ||
  fail "job $id's log does not name the next job"
grep -q "hpctrain: job $next attempt 2 on" "$run/logs/slurm-$next.out" ||
  fail "job $next did not run as attempt 2"
[[ $(wc -l < "$run/attempts.jsonl") == 2 ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
[[ $(ledger_field "$run" 1 reason) == requeued ]] || fail "ledger line 1 reason"
[[ $(ledger_field "$run" 1 job_id) == "$id" ]] || fail "ledger line 1 job"
[[ $(ledger_field "$run" 2 reason) == completed ]] || fail "ledger line 2 reason"
[[ $(ledger_field "$run" 2 job_id) == "$next" ]] || fail "ledger line 2 job"
[[ $(ledger_field "$run" 2 restart) == 1 ]] || fail "ledger line 2 restart"
status=$("$HPCTRAIN" status --json "$run")
[[ $(jq -r .restarts <<<"$status") == 1 ]] || fail "status restarts: $status"
[[ $(jq -r .job_id <<<"$status") == "$next" ]] || fail "status follows job $(jq -r .job_id <<<"$status")"
echo "ok: job $id chained to job $next"
