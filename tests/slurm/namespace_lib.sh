# Sourced by the tests that run training jobs on a namespace cluster of their own
# (scripts/slurm-multinode.sh), kill or slow its nodes and stop it: resilience.sh,
# straggler_evict.sh. Needs HPCTRAIN, WORKER, HPCTRAIN_MN_SCRIPT and SLURM_CONF (DIR/slurm.conf of
# the cluster to start); sets cluster and stops it on exit.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/../support/synthetic_spec.sh"
: "${WORKER:?}" "${HPCTRAIN_MN_SCRIPT:?}"
cluster=$(dirname "$SLURM_CONF")
trap 'cleanup; "$HPCTRAIN_MN_SCRIPT" stop "$cluster" >/dev/null 2>&1' EXIT

# Nodes have a private /tmp; the build may be in /tmp (a CI clone): run copies from /var/tmp, the
# worker and hpctrain too (the batch script hands over to the hpctrain that rendered it), as a
# site installs both where every node sees them.
mkdir -p "$work/bin"
cp "$WORKER" "$HPCTRAIN" "$work/bin/"
WORKER=$work/bin/$(basename "$WORKER")
HPCTRAIN=$work/bin/$(basename "$HPCTRAIN")

fresh_cluster() {
  "$HPCTRAIN_MN_SCRIPT" restart "$cluster" "$1" > "$work/cluster.log" 2>&1 ||
    fail "cluster start: $(tail -n 20 "$work/cluster.log")"
}

# spec NAME NODES [KEY=VALUE | -KEY]...: a spec in $work/NAME.toml, these defaults changed as
# synthetic_spec's arguments say; its path.
spec() {
  local name=$1 nodes=$2; shift 2
  synthetic_spec job.name="$name" job.partition=debug job.srun_mpi=pmix job.nodes="$nodes" \
    job.tasks_per_node=2 job.time=00:20:00 job.run_dir="$work/{name}" job.worker="$WORKER" \
    data.synthetic_samples=960 train.batch_size=8 train.log_every_steps=1 train.threads=1 \
    train.rendezvous_timeout_s=120 train.epochs=10 train.max_steps=200 \
    train.schedule.name=constant checkpoint.every_steps=10 preemption.signal_lead_s=60 \
    resilience.spare_nodes=1 "$@" > "$work/$name.toml"
  "$HPCTRAIN" check "$work/$name.toml" > /dev/null ||
    fail "check $name: $("$HPCTRAIN" check "$work/$name.toml" 2>&1)"
  echo "$work/$name.toml"
}

# last_step RUN: the newest step in metrics.jsonl (a train record each step), 0 before the first.
last_step() {
  local step
  step=$({ grep -h '"kind":"train"' "$1/metrics.jsonl" 2>/dev/null || true; } | tail -n 1 |
         jq -r '.step')
  echo "${step:-0}"
}
reached() { (( $(last_step "$1") >= $2 )); }
# done_ledger RUN: the ledger's last line is the job's end (not a node_lost line).
done_ledger() {
  [[ -s $1/attempts.jsonl ]] && tail -n 1 "$1/attempts.jsonl" | jq -e '.reason != "node_lost"' >/dev/null
}
fingerprint() {
  grep -ho 'final weights fnv1a64 0x[0-9a-f]*' "$1"/logs/*.err | awk '{print $4}' | sort -u
}
# rank0_node RUN: where rank 0 runs now (its progress lines say).
rank0_node() {
  grep -o '^\[rank 0/[0-9]* [^]]*\]' "$1"/logs/*.out | tail -n 1 | sed 's/.* \(.*\)\]/\1/'
}
