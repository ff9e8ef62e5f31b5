#!/usr/bin/env bash
# The job's time limit (docs/preemption.md), with real worker processes (2 ranks) and no signal:
# with SLURM_JOB_END_TIME set, the ranks checkpoint and stop once less time is left than twice the
# last save, three steps and 30 s: "stopping at step N (the job's time limit is near)", exit 75 on
# every rank, step N committed, and the 30 s margin still left when they have exited.
#   time_limit.sh WORKER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"

alive() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }

spec limit
# Far more steps than fit before the limit: only the limit stops the run.
sed -i 's/^epochs = .*/epochs = 100/' "$work/limit.toml"
end=$(($(date +%s) + 42))
SLURM_JOB_END_TIME=$end launch limit 2 "$work/limit.log"
while alive && (($(date +%s) < end)); do sleep 0.2; done
alive && fail "still training at the time limit"
left=$((end - $(date +%s)))
finish
[[ $statuses == "75 75" ]] || fail "exited '$statuses'"
line=$(grep -E "stopping at step [0-9]+ \(the job's time limit is near\)" "$work/limit.log.rank0") ||
  fail "no time-limit stop line"
step=$(grep -oE 'stopping at step [0-9]+' <<<"$line" | grep -oE '[0-9]+$')
grep -q "checkpoint step $step committed" "$work/limit.log.rank0" || fail "step $step not committed"
# Stopped near the limit, not at the start: a few seconds of training came first.
((step >= 8)) || fail "stopped at step $step, before the limit was near"
((left >= 25)) || fail "exited $left s before the limit; the margin is 30 s"
echo "stopped at step $step with $left s left, exit 75, checkpoint committed: ok"
