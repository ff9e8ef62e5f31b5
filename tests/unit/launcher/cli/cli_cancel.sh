#!/usr/bin/env bash
# hpctrain cancel with stand-ins for squeue, sacct and scancel: a job that has already ended (by
# squeue's word, sacct's, or the run's ledger once Slurm has forgotten it) is not "cancelled" and
# scancel is not called; a running one is; scancel's "already completed" (the job ended between
# the query and scancel) is reported as an ended job.
#   cli_cancel.sh HPCTRAIN
set -uo pipefail
hpctrain=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/expect.sh"

# The stand-ins answer from $tmp/squeue-ID and $tmp/sacct-ID ("ID|STATE|REASON|NODES" lines) and
# log their calls; scancel fails as Slurm's does when $tmp/scancel-fails holds its message.
mkdir -p "$tmp/bin"
: > "$tmp/slurm.conf"
export SLURM_CONF=$tmp/slurm.conf STANDIN=$tmp
cat > "$tmp/bin/squeue" <<'SH'
#!/bin/bash
id=; for a in "$@"; do [[ $a == --jobs=* ]] && id=${a#--jobs=}; done
echo "squeue $id" >> "$STANDIN/calls"
cat "$STANDIN/squeue-$id" 2>/dev/null; exit 0
SH
cat > "$tmp/bin/sacct" <<'SH'
#!/bin/bash
id=; for a in "$@"; do [[ $a == --jobs=* ]] && id=${a#--jobs=}; done
echo "sacct $id" >> "$STANDIN/calls"
cat "$STANDIN/sacct-$id" 2>/dev/null; exit 0
SH
cat > "$tmp/bin/scancel" <<'SH'
#!/bin/bash
echo "scancel $*" >> "$STANDIN/calls"
[[ -f $STANDIN/scancel-fails ]] && { cat "$STANDIN/scancel-fails" >&2; exit 1; }
exit 0
SH
chmod +x "$tmp/bin"/*
export PATH=$tmp/bin:$PATH

# run_dir NAME JOB_ID [ARRAY_TASKS]: a submitted run directory.
run_dir() {
  mkdir -p "$tmp/$1/logs"
  printf '{"job_id":"%s","submitted_at":"2026-11-22T02:48:07Z","array_tasks":%d}\n' "$2" "${3:-0}" \
    > "$tmp/$1/submissions.jsonl"
  echo "$tmp/$1"
}
scancelled() { grep -q "^scancel $1\$" "$tmp/calls" 2>/dev/null; }

# Completed, by squeue's word: no scancel, no "cancelled".
r=$(run_dir done 101)
echo "101|COMPLETED|None|n1" > "$tmp/squeue-101"
expect 0 "^hpctrain: job 101 had already ended \(COMPLETED, per squeue\); nothing to cancel$" \
  "$hpctrain" cancel "$r"
scancelled 101 && check_failed "scancel was called for the completed job 101"

# Running: scancel, and it says so.
r=$(run_dir running 102)
echo "102|RUNNING|None|n1" > "$tmp/squeue-102"
expect 0 "^cancelled job 102$" "$hpctrain" cancel "$r"
scancelled 102 || check_failed "scancel was not called for the running job 102"

# Forgotten by squeue, known to sacct as FAILED.
r=$(run_dir failed 103)
echo "103|FAILED|1:0|n1" > "$tmp/sacct-103"
expect 0 "job 103 had already ended \(FAILED, per sacct\)" "$hpctrain" cancel "$r"
scancelled 103 && check_failed "scancel was called for the failed job 103"

# Known to neither (purged, accounting off): the ledger's last line says completed.
r=$(run_dir ledger 104)
printf '%s\n' '{"job_id":"104","restart":0,"reason":"requeued","exit_status":75}' \
  '{"job_id":"104","restart":1,"reason":"completed","exit_status":0}' > "$r/attempts.jsonl"
expect 0 "job 104 had already ended \(completed, per the run's ledger attempts.jsonl\)" \
  "$hpctrain" cancel "$r"
scancelled 104 && check_failed "scancel was called for job 104, which its ledger says completed"
# ... but a ledger whose last word is a requeue does not end the job: scancel decides.
r=$(run_dir requeued 105)
echo '{"job_id":"105","restart":0,"reason":"requeued","exit_status":75}' > "$r/attempts.jsonl"
expect 0 "^cancelled job 105$" "$hpctrain" cancel "$r"

# An array: ended only when every task has.
r=$(run_dir sweep 106 2)
printf '106_0|COMPLETED|None|n1\n106_1|RUNNING|None|n1\n' > "$tmp/squeue-106"
expect 0 "^cancelled job 106$" "$hpctrain" cancel "$r"
printf '106_0|COMPLETED|None|n1\n106_1|FAILED|None|n1\n' > "$tmp/squeue-106"
expect 0 "job 106 had already ended \(COMPLETED, FAILED, per squeue\)" "$hpctrain" cancel "$r"

# Ended between the query and scancel: Slurm's complaint, reported as an ended job.
r=$(run_dir race 107)
echo "107|RUNNING|None|n1" > "$tmp/squeue-107"
echo "scancel: error: Kill job error on job id 107: Job/step already completing or completed" \
  > "$tmp/scancel-fails"
expect 0 "job 107 had already ended \(scancel: .*already completing or completed\)" \
  "$hpctrain" cancel "$r"
# Any other scancel failure is still one.
r=$(run_dir denied 108)
echo "108|RUNNING|None|n1" > "$tmp/squeue-108"
echo "scancel: error: Kill job error on job id 108: Access/permission denied" > "$tmp/scancel-fails"
expect 1 "scancel 108 failed: .*permission denied" "$hpctrain" cancel "$r"
finish
