#!/usr/bin/env bash
# hpctrain list and hpctrain logs against the real cluster: a requeued job followed with
# `logs --follow` from submission until it ends by itself (its output byte for byte the log file),
# its attempts split with --attempt, a rank's lines from the .out and the .err with --rank; `list`
# over nested runs, a job array and a dry run, with one squeue call for all of them, and with no
# reachable controller.
source "$(dirname "$0")/lib.sh"

# A requeued job, followed from before it starts (the log does not exist yet) to its end.
spec=$(write_spec requeue requeue-once)
id=$(submit "$spec")
run=$work/requeue
"$HPCTRAIN" logs --follow --timeout 280 "$run" > "$work/followed.out" 2> "$work/follow.err" &
follow_pid=$!
wait_for 290 "end of logs --follow" bash -c "! kill -0 $follow_pid 2>/dev/null"
wait "$follow_pid" || fail "logs --follow exited $?: $(cat "$work/follow.err")"
grep -q -- "--timeout" "$work/follow.err" && fail "logs --follow ran into its timeout"
[[ $(state "$run") == COMPLETED ]] || fail "followed job is $(state "$run"), not COMPLETED"
log=$run/logs/slurm-$id.out
grep -q "attempt 2 on" "$log" || fail "the job was not requeued"
cmp "$work/followed.out" "$log" || fail "logs --follow printed something other than $log"
# Without --follow: the file as it is; --attempt N, the lines of attempt N alone.
"$HPCTRAIN" logs "$run" | cmp - "$log" || fail "logs differs from $log"
a1=$("$HPCTRAIN" logs --attempt 1 "$run") || fail "logs --attempt 1"
a2=$("$HPCTRAIN" logs --attempt 2 "$run") || fail "logs --attempt 2"
[[ $a1 == *"attempt 1 on"* && $a1 == *"restart 0"* && $a1 != *"restart 1"* ]] || fail "attempt 1: $a1"
[[ $a2 == "hpctrain: job $id attempt 2 on"* && $a2 == *"restart 1"* && $a2 != *"restart 0"* ]] ||
  fail "attempt 2: $a2"
[[ "$a1"$'\n'"$a2"$'\n' == "$(cat "$log")"$'\n' ]] || fail "the two attempts are not the whole log"
out=$("$HPCTRAIN" logs --attempt 3 "$run" 2>&1) && fail "--attempt 3 accepted"
[[ $out == *"holds attempts 1..2"* ]] || fail "--attempt 3: $out"
out=$("$HPCTRAIN" logs --rank 2 "$run" 2>&1) && fail "--rank 2 of 2 accepted"
[[ $out == *"2 ranks"* ]] || fail "--rank 2: $out"
"$HPCTRAIN" logs --stderr "$run" | cmp - "$run/logs/slurm-$id.err" || fail "logs --stderr"
# --rank 1: rank 1 writes to stderr only (payload.sh, as the worker): its lines of both attempts,
# from the .err; rank 0's from the .out.
r1=$("$HPCTRAIN" logs --rank 1 "$run") || fail "logs --rank 1 failed: $r1"
[[ $r1 == "[rank 1/2 "*"] payload on stderr, restart 0"$'\n'"[rank 1/2 "*"] payload on stderr, restart 1" ]] ||
  fail "logs --rank 1: '$r1'"
r0=$("$HPCTRAIN" logs --rank 0 "$run") || fail "logs --rank 0 failed"
[[ $r0 == "[rank 0/2 "*"] payload on stdout, restart 0"$'\n'"[rank 0/2 "*"] payload on stdout, restart 1" ]] ||
  fail "logs --rank 0: '$r0'"

# list: nested runs, an array (one line per task), a dry run; one squeue call for all.
mkdir -p "$work/nest"
sed "s|run_dir = \".*\"|run_dir = \"$work/nest/deep/{name}\"|" "$(write_spec second ok)" > "$work/nest.toml"
id2=$(submit "$work/nest.toml")
aspec=$(write_spec sweep sweep '[sweep.params]
"train.optimizer.lr" = [0.01, 0.02]')
aid=$(submit "$aspec")
"$HPCTRAIN" submit --dry-run "$(write_spec drafted ok)" 2>/dev/null || fail "dry run"
wait_state "$work/nest/deep/second" COMPLETED 120
for t in 0 1; do wait_state "$work/sweep" COMPLETED 120 "$t"; done
mkdir -p "$work/bin"
cat > "$work/bin/squeue" <<SH
#!/bin/bash
echo call >> "$work/squeue-calls"
exec $(command -v squeue) "\$@"
SH
chmod +x "$work/bin/squeue"
json=$(PATH=$work/bin:$PATH "$HPCTRAIN" list --json "$work") || fail "list --json"
[[ $(wc -l < "$work/squeue-calls") == 1 ]] || fail "list called squeue $(wc -l < "$work/squeue-calls") times"
row() { jq -r --arg n "$1" ".runs[] | select(.name == \$n) | .$2" <<< "$json"; }
[[ $(jq -r '[.runs[].name] | join(" ")' <<< "$json") == \
   "drafted nest/deep/second requeue sweep/task-000 sweep/task-001" ]] ||
  fail "list names: $(jq -c '[.runs[].name]' <<< "$json")"
[[ $(row requeue state) == COMPLETED && $(row requeue restarts) == 1 ]] || fail "requeue row: $json"
[[ $(row requeue job_id) == "$id" ]] || fail "requeue job id"
[[ $(row nest/deep/second state) == COMPLETED && $(row nest/deep/second job_id) == "$id2" ]] ||
  fail "nested row: $json"
[[ $(row sweep/task-001 job_id) == "${aid}_1" && $(row sweep/task-001 state) == COMPLETED ]] ||
  fail "array task row: $json"
[[ $(row drafted state) == unsubmitted ]] || fail "dry-run row: $json"
text=$("$HPCTRAIN" list "$work") || fail "list"
[[ $(grep -c COMPLETED <<< "$text") == 4 ]] || fail "list text: $text"
[[ $(head -n 1 <<< "$text") == RUN* ]] || fail "list header: $text"
# No controller: list still lists and says why once; the four runs that ended say so from their
# ledgers (the dry run stays unsubmitted).
out=$(SLURM_CONF=$work/nothing.conf "$HPCTRAIN" list "$work" 2> "$work/list.err") ||
  fail "list failed without a controller"
[[ $(grep -c "Slurm was not reachable (.*no Slurm controller was reachable" "$work/list.err") == 1 ]] ||
  fail "list without controller: $(cat "$work/list.err")"
[[ $(grep -c " ledger:completed " <<< "$out") == 4 ]] || fail "list without controller: $out"
out=$("$HPCTRAIN" list "$work/missing" 2>&1) && fail "list of a missing root succeeded"
[[ $out == *"$work/missing"* ]] || fail "missing root not named: $out"
echo "ok"
