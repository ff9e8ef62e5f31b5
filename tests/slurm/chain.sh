#!/usr/bin/env bash
# Job chains (docs/preemption.md "Job chains"): where Slurm refuses `scontrol requeue` for a job
# (here each job's Requeue flag is switched off after submission, as a site's job_submit plugin or
# an administrator's policy leaves it; JobRequeue=0 does the same to jobs without --requeue), the
# worker's "requeue me" (75) makes the step supervisor submit the next job of a chain. A run of
# three jobs: the first two attempts ask to be requeued, the third completes.
#
# - The next job waits for the one it continues (--dependency=afterany:JOB) even where the node has
#   the CPUs to start it at once: each job is held after submitting the next one (a stand-in
#   sbatch, first on PATH, that waits for the test, as a job still writing its last checkpoint
#   would be), and meanwhile the next job must pend on its dependency, its payload not started.
# - The ledger, hpctrain status, list and the report call the first two attempts chained (none was
#   requeued), and show every job of the chain.
source "$(dirname "$0")/lib.sh"
source "$here/../report/page_lib.sh"

# sbatch as the step supervisor finds it: the real one, then, inside a job, the job held until the
# test writes RUN_DIR/release-JOB (at most 30 s, well inside the supervisor's deadline for sbatch).
real_sbatch=$(command -v sbatch) || fail "no sbatch"
mkdir -p "$work/bin"
cat > "$work/bin/sbatch" <<SH
#!/usr/bin/env bash
out=\$("$real_sbatch" "\$@")
status=\$?
printf '%s\n' "\$out"
if (( status == 0 )) && [[ -n \${SLURM_JOB_ID:-} && -n \${HPCTRAIN_RUN_DIR:-} ]]; then
  echo "\${out%%;*}" > "\$HPCTRAIN_RUN_DIR/held-\$SLURM_JOB_ID"
  for _ in \$(seq 150); do
    [[ -e \$HPCTRAIN_RUN_DIR/release-\$SLURM_JOB_ID ]] && break
    sleep 0.2
  done
fi
exit \$status
SH
chmod +x "$work/bin/sbatch"
export PATH=$work/bin:$PATH

# refuse_requeue JOB: Slurm will refuse scontrol requeue for JOB.
refuse_requeue() {
  scontrol update JobId="$1" Requeue=0 || fail "scontrol update JobId=$1 Requeue=0"
  scontrol show job "$1" | grep -q 'Requeue=0' || fail "job $1 is still requeueable"
}

# waits_for JOB NEXT ATTEMPT: while JOB still runs (held in sbatch), NEXT, the chain's next job,
# pends on its dependency for 8 s, its payload (restart ATTEMPT) not started, though the node has
# the CPUs to run it; then Slurm's record of what it was asked.
waits_for() {
  local job=$1 next=$2 attempt=$3 deadline=$((SECONDS + 8)) cpus state
  # CPUs allocated/idle/other/total: the next job (2 tasks of 1 CPU) fits beside this one.
  cpus=$(sinfo -h -o %C)
  (( $(cut -d/ -f2 <<<"$cpus") >= 2 )) ||
    fail "the node has no 2 idle CPUs ($cpus): job $next could not start beside job $job anyway"
  while (( SECONDS < deadline )); do
    [[ $(squeue -h -j "$job" -o %T) == RUNNING ]] || fail "job $job was not held while it runs"
    state=$(squeue -h -j "$next" -o '%T %r')
    # The reason squeue shows is the scheduler's last word, not the dependency: with other tests'
    # jobs on the cluster (CI, ctest -j2) it said Resources for the chain's next job twice; what
    # must hold is that the dependency is unfulfilled (the failure line shows it if not).
    if [[ $state != "PENDING Dependency" ]]; then
      [[ $state == PENDING* ]] &&
        scontrol show job "$next" | grep -Eq "Dependency=afterany:$job\(unfulfilled\)( |$)" ||
        fail "job $next ($state; $(scontrol show job "$next" | grep -o 'Dependency=[^ ]*')) did not wait for job $job, which it continues and which still runs: two jobs in one run directory"
    fi
    [[ -e $run/payload-rank0-restart$attempt ]] &&
      fail "job $next's payload started while job $job still runs: two jobs in one run directory"
    sleep 0.5
  done
  scontrol show job "$next" | grep -Eq "Dependency=afterany:$job(\(unfulfilled\))?( |$)" ||
    fail "job $next was not submitted with --dependency=afterany:$job: $(scontrol show job "$next" | grep -o 'Dependency=[^ ]*')"
}

spec=$(write_spec chain go-then-requeue-twice)
run=$work/chain
links=("$(submit "$spec")")
for attempt in 0 1; do
  id=${links[$attempt]}
  refuse_requeue "$id"
  wait_for 180 "attempt $((attempt + 1)) (job $id)" test -e "$run/payload-rank0-restart$attempt"
  : > "$run/go-$attempt"
  wait_for 120 "the next job of the chain from job $id" test -s "$run/held-$id"
  next=$(cat "$run/held-$id")
  [[ $next =~ ^[0-9]+$ && $next != "$id" ]] || fail "the chain's next job id is '$next'"
  submitted+=("$next")
  links+=("$next")
  waits_for "$id" "$next" $((attempt + 1))
  : > "$run/release-$id"
  wait_for 60 "job $next in submissions.jsonl" \
    bash -c "[[ \$(jq -r .chained_from '$run/submissions.jsonl' | tail -n 1) == '$id' ]]"
  [[ $(jq -r .job_id "$run/submissions.jsonl" | tail -n 1) == "$next" ]] ||
    fail "submissions.jsonl: $(cat "$run/submissions.jsonl")"
done
wait_for 180 "the chain's third attempt" test -e "$run/payload-rank0-restart2"
wait_state "$run" COMPLETED 120

for attempt in 0 1; do
  id=${links[$attempt]} next=${links[$((attempt + 1))]}
  grep -q "scontrol requeue $id was refused" "$run/logs/slurm-$id.err" ||
    fail "job $id's log does not say the requeue was refused"
  grep -q "job $next continues the run once job $id has ended" "$run/logs/slurm-$id.out" ||
    fail "job $id's log does not name the next job"
  grep -q "hpctrain: job $next attempt $((attempt + 2)) on" "$run/logs/slurm-$next.out" ||
    fail "job $next did not run as attempt $((attempt + 2))"
done

# The ledger: one line a job, the first two chained (no requeue happened), counting on.
[[ $(wc -l < "$run/attempts.jsonl") == 3 ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
reasons=(chained chained completed)
for line in 1 2 3; do
  reason=$(ledger_field "$run" $line reason)
  [[ $reason == "${reasons[$((line - 1))]}" ]] ||
    fail "ledger line $line (job ${links[$((line - 1))]}) says '$reason', not ${reasons[$((line - 1))]}: a chained attempt called requeued"
  [[ $(ledger_field "$run" $line job_id) == "${links[$((line - 1))]}" ]] || fail "ledger line $line job"
  [[ $(ledger_field "$run" $line restart) == $((line - 1)) ]] || fail "ledger line $line restart"
done

# status and list: every job of the chain, the chained attempts counted, none called requeued.
chain_ids=$(IFS=,; echo "${links[*]}")
status=$("$HPCTRAIN" status --json "$run")
[[ $(jq -r .job_id <<<"$status") == "${links[2]}" ]] || fail "status follows job $(jq -r .job_id <<<"$status")"
[[ $(jq -r '.chain | join(",")' <<<"$status") == "$chain_ids" ]] ||
  fail "status --json does not show the chain's jobs $chain_ids: $(jq -c .chain <<<"$status")"
[[ $(jq -r '"\(.restarts) \(.chained)"' <<<"$status") == "2 2" ]] || fail "status restarts: $status"
text=$("$HPCTRAIN" status "$run")
grep -q "^chain:      ${links[0]} -> ${links[1]} -> ${links[2]} " <<<"$text" ||
  fail "status does not show the chain's jobs: $text"
grep -q "requeued" <<<"$text" && fail "status calls the chain requeued: $text"
listing=$("$HPCTRAIN" list --json "$run")
[[ $(jq -r '.runs[0].chain | join(",")' <<<"$listing") == "$chain_ids" ]] ||
  fail "list --json does not show the chain's jobs: $listing"
"$HPCTRAIN" list "$run" | grep -q " 2 (chain: 3 jobs) " || fail "list: $("$HPCTRAIN" list "$run")"

# The report: its data has the chain and the ledger's reasons; in a browser (when there is one),
# the page shows every job of the chain and each attempt as the ledger calls it.
"$HPCTRAIN" report "$run" -o "$work/report.html" > /dev/null || fail "hpctrain report"
data=$(python3 - "$work/report.html" <<'PY'
import json, re, sys
page = open(sys.argv[1], encoding='utf-8').read()
data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1))
print(','.join(s['job_id'] for s in data['chain']), ','.join(a['reason'] for a in data['runs'][0]['attempts']))
PY
) || fail "the report's data: $data"
[[ $data == "$chain_ids chained,chained,completed" ]] ||
  fail "the report does not show the chain as the ledger has it: $data"
if [[ -n $(report_chromium) ]]; then
  report_check "$run" "$work/report-chain.png" 1400x1000 --no-metrics || fail "the report page of the chain"
fi
echo "ok: job ${links[0]} chained to ${links[1]}, then ${links[2]}"
