#!/usr/bin/env bash
# The job's time limit (docs/preemption.md), with real worker processes (2 ranks) and no signal:
# with SLURM_JOB_END_TIME set, the ranks checkpoint and stop once less time is left than twice the
# last save, three steps and 30 s: "stopping at step N (the job's time limit is near)", exit 75 on
# every rank, step N committed, and the 30 s margin still left when they have exited.
#   time_limit.sh WORKER [slow-async]
# slow-async: checkpoint.async on a slow filesystem (each fsync HPCTRAIN_TEST_SLOW_FSYNC seconds
#   longer), so a save takes about 9 s and ends while training goes on. The rule must plan with
#   that measured time: a stop planned as if saves were instant starts its last, blocking save
#   about 30 s before the limit and exits with less than the margin left (Slurm's KillWait): on a
#   real cluster, killed mid-save.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"
mode=${2:-}

alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }

spec limit
# Far more steps than fit before the limit: only the limit stops the run.
sed -i 's/^epochs = .*/epochs = 100/' "$work/limit.toml"
budget=42
if [[ $mode == slow-async ]]; then
  # A background save every 15 s, committed while training goes on (9 s), so the time comes
  # from the commit at a step boundary, not from a drain before the next save.
  sed -i -e 's/^every_steps = .*/every_steps = 0\nevery_minutes = 0.25\nasync = true/' \
    "$work/limit.toml"
  grep -q '^async = true' "$work/limit.toml" || fail "the spec has no checkpoint.async"
  export HPCTRAIN_TEST_SLOW_FSYNC=1.5
  budget=100
elif [[ -n $mode ]]; then
  fail "unknown mode '$mode'"
fi
end=$(($(date +%s) + budget))
SLURM_JOB_END_TIME=$end launch limit 2 "$work/limit.log"
while alive && (($(date +%s) < end)); do sleep 0.2; done
alive && fail "still training at the time limit"
left=$((end - $(date +%s)))
finish
[[ $statuses == "75 75" ]] || fail "exited '$statuses'"
line=$(grep -E "stopping at step [0-9]+ \(the job's time limit is near\)" "$work/limit.log.rank0") ||
  fail "no time-limit stop line"
step=$(grep -oE 'stopping at step [0-9]+' <<<"$line" | grep -oE '[0-9]+$')
# The end line the step supervisor reads (stderr; the stop line above is rank 0's stdout): a time
# limit, not a preemption.
grep -q "hpctrain-worker ended: time_limit (exit status 75): checkpointed at step $step before the job's time limit" \
  "$work/limit.log.rank0" || fail "rank 0 printed no time_limit end line"
grep -q "checkpoint step $step committed" "$work/limit.log.rank0" || fail "step $step not committed"
# Stopped near the limit, not at the start: a few seconds of training came first.
((step >= 8)) || fail "stopped at step $step, before the limit was near"
if [[ $mode == slow-async ]]; then
  # The rule had a background save's time to plan with: one committed before the stop.
  grep -E "checkpoint step [0-9]+ committed" "$work/limit.log.rank0" | grep -v "step $step " |
    grep -q "in the background" || fail "no background save committed before the stop"
fi
why=
[[ $mode == slow-async ]] && why=" (was the stop planned without the measured time of a save?)"
((left >= 25)) || fail "exited $left s before the limit; the margin is 30 s$why"
echo "${mode:+$mode: }stopped at step $step with $left s left, exit 75, checkpoint committed: ok"
