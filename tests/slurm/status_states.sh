#!/usr/bin/env bash
# hpctrain status follows a job through PENDING (held), RUNNING and COMPLETED.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec states wait-for-go)
id=$(submit "$spec" --set 'job.extra_sbatch=["--hold"]')
run=$work/states
wait_state "$run" PENDING 30
"$HPCTRAIN" status "$run" | grep -q "PENDING" || fail "status text shows no PENDING"
scontrol release "$id" || fail "scontrol release"
wait_state "$run" RUNNING 60
touch "$run/go"
wait_state "$run" COMPLETED 60
json=$("$HPCTRAIN" status --json "$run")
[[ $(jq -r .job_id <<<"$json") == "$id" ]] || fail "status job id: $json"
[[ $(jq -r .attempts <<<"$json") == 1 ]] || fail "status attempts: $json"
[[ $(jq -r .last_attempt.reason <<<"$json") == completed ]] || fail "status last attempt: $json"
echo "ok"
