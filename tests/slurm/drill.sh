#!/usr/bin/env bash
# hpctrain drill (docs/resilience.md "Drill") on the local cluster, the real worker on synthetic
# data (rank 0 slowed to 0.4 s a step, so that the events have a run to play on), three clusters'
# policies:
#   requeue    the cluster requeues: the preemption notice, `scontrol requeue`, a rank that stops
#              answering (SIGSTOP) and a killed node (its ranks SIGKILLed, the default without
#              --kill-command) are each survived, training comes back from a checkpoint, and the
#              disturbed run ends with the undisturbed run's weights, bit for bit: exit 0 and the
#              table
#   chain      Slurm refuses requeue (each job's Requeue flag switched off after submission, as a
#              site's job_submit plugin does) and preemption.chain = true: the drill says the run
#              goes on by a chain, the preemption notice is survived by the chain's next job
#   nochain    the same refusal with preemption.chain = false: the drill fails before playing
#              anything, saying what to change, and cancels its jobs
#   deaf       the preemption notice never reaches the workers (job.worker is a wrapper that
#              ignores it and runs the worker in a session of its own, as a container runtime
#              may): the drill fails as soon as training has gone on well past the notice, saying
#              so and what to change, instead of waiting out --timeout
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/../support/synthetic_spec.sh"
: "${WORKER:?}"

spec() {  # spec NAME KEY=VALUE...
  local name=$1
  shift
  synthetic_spec job.name="$name" job.profile=local job.tasks_per_node=2 \
    job.run_dir="$work/runs/{name}" job.worker="$WORKER" data.synthetic_samples=4096 \
    data.synthetic_image_size=16 train.epochs=1 train.batch_size=16 train.log_every_steps=4 \
    resilience.heartbeat_timeout_s=5 resilience.hang_grace_s=5 "$@" > "$work/$name.toml"
}

# sbatch that switches the submitted job's Requeue flag off, first on PATH for the drill and the
# jobs' step supervisors (a chain's next job gets it too).
mkdir -p "$work/bin"
real_sbatch=$(command -v sbatch) || fail "no sbatch"
cat > "$work/bin/sbatch" <<SH
#!/usr/bin/env bash
out=\$("$real_sbatch" "\$@") || exit \$?
printf '%s\n' "\$out"
scontrol update JobId="\${out%%;*}" Requeue=0
SH
chmod +x "$work/bin/sbatch"

# Rank 0 sleeps 0.4 s before each batch (the jobs inherit the submitting environment).
export HPCTRAIN_TEST_STALL=0:every:data:0.4
spec requeue
spec chain preemption.chain=true
spec nochain preemption.chain=false
# The deaf wrapper: the job's signals reach it (proctrack/pgid signals the task's process group)
# and not the worker in its own session; the workers' pids are kept, as they outlive the job.
cat > "$work/bin/deaf-worker" <<SH
#!/usr/bin/env bash
trap '' USR2
setsid "$WORKER" "\$@" &
echo \$! >> "$work/deaf.pids"
wait \$!
SH
chmod +x "$work/bin/deaf-worker"
spec deaf job.worker="$work/bin/deaf-worker"

started=$SECONDS
"$HPCTRAIN" drill --events preempt,requeue,hang,kill-node --steps 80 --timeout 240 \
  --dir "$work/drills/requeue" "$work/requeue.toml" \
  > "$work/requeue.out" 2> "$work/requeue.err" ||
  fail "drill on a cluster that requeues failed: $(cat "$work/requeue.out" "$work/requeue.err")"
cat "$work/requeue.out"
echo "requeue drill: $((SECONDS - started)) s"
for event in "preemption notice" "requeue" "rank stops answering" "killed node"; do
  grep -Eq "^$event +step [0-9]+ .* from step [0-9]+ +[0-9.]+ s$" "$work/requeue.out" ||
    fail "no survived '$event' row: $(cat "$work/requeue.out")"
done
grep -Eq "^final weights .*fnv1a64 (0x[0-9a-f]+) = the undisturbed run's \1$" "$work/requeue.out" ||
  fail "the weights row: $(cat "$work/requeue.out")"
grep -q "^preemption notice .*requeued (preempted)" "$work/requeue.out" ||
  fail "the preemption notice was not requeued as preempted: $(cat "$work/requeue.out")"
ls -d "$work"/drills/requeue/*/drilled "$work"/drills/requeue/*/reference > /dev/null ||
  fail "the two runs are not under --dir"

started=$SECONDS
PATH=$work/bin:$PATH "$HPCTRAIN" drill --events preempt --steps 40 --no-reference \
  --timeout 240 --dir "$work/drills/chain" "$work/chain.toml" > "$work/chain.out" \
  2> "$work/chain.err" || fail "drill with a chain failed: $(cat "$work/chain.out" "$work/chain.err")"
cat "$work/chain.out"
echo "chain drill: $((SECONDS - started)) s"
grep -q "Slurm will not requeue job [0-9]* .*the run goes on by a job chain" "$work/chain.err" ||
  fail "the drill did not say the run goes on by a chain: $(cat "$work/chain.err")"
grep -Eq "^preemption notice +step [0-9]+ +chained to job [0-9]+ \(preempted\) +from step" \
  "$work/chain.out" || fail "the preemption was not survived by a chain: $(cat "$work/chain.out")"

started=$SECONDS
if PATH=$work/bin:$PATH "$HPCTRAIN" drill --timeout 60 --dir "$work/drills/nochain" \
  "$work/nochain.toml" > "$work/nochain.out" 2> "$work/nochain.err"; then
  fail "a drill where neither requeue nor a chain is possible passed"
fi
echo "nochain drill: $((SECONDS - started)) s: $(tail -n 1 "$work/nochain.err")"
grep -q "Slurm will not requeue job .*preemption.chain is false.*set preemption.chain = true; jobs [0-9]* and [0-9]* cancelled" \
  "$work/nochain.err" || fail "no clear failure: $(cat "$work/nochain.err")"
for id in $(grep -ho '"job_id":"[0-9]*"' "$work"/drills/nochain/*/*/submissions.jsonl | grep -o '[0-9]*'); do
  wait_for 60 "job $id cancelled" bash -c "[[ \$(squeue -h -j $id -o %T 2>/dev/null) == '' || \$(squeue -h -j $id -o %T) == CANCELLED ]]"
done
started=$SECONDS
if "$HPCTRAIN" drill --events preempt --steps 40 --no-reference --timeout 240 \
  --dir "$work/drills/deaf" "$work/deaf.toml" > "$work/deaf.out" 2> "$work/deaf.err"; then
  fail "a drill whose preemption notice reached no worker passed: $(cat "$work/deaf.out")"
fi
# The workers in their own sessions outlive the cancelled job: ended here.
for pid in $(cat "$work/deaf.pids" 2>/dev/null); do kill "$pid" 2>/dev/null; done
echo "deaf drill: $((SECONDS - started)) s: $(tail -n 1 "$work/deaf.err")"
grep -Eq "^FAILED +preemption notice +step [0-9]+ +the preemption signal \(SIGUSR2\) reached no worker: training went on from step [0-9]+ to step [0-9]+ without stopping" \
  "$work/deaf.out" || fail "the unheeded notice was not reported: $(cat "$work/deaf.out" "$work/deaf.err")"
grep -q "run it with exec, or have it forward the signal" "$work/deaf.err" ||
  fail "the drill did not say what to change: $(cat "$work/deaf.err")"
(( SECONDS - started < 200 )) || fail "the deaf drill took $((SECONDS - started)) s: it waited out --timeout"
echo "drill: requeue survived with equal weights, the chain reported and survived, no chain refused, an unheeded notice reported"
