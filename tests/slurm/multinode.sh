#!/usr/bin/env bash
# The multi-node test cluster (scripts/slurm-multinode.sh) is really multi-node: a batch job with
# -N$NODES --ntasks-per-node=2 --mpi=pmix puts two tasks on each of node1..nodeN, with distinct
# hostnames and eth0 addresses and a private /tmp per node; an Open MPI all-reduce across the
# nodes gives the right sum. The job's srun steps run inside node1's namespace, as hpctrain's do;
# one srun from the root namespace checks that clients outside the nodes reach them too.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/slurm/lib.sh
source "$here/lib.sh"
nodes=${HPCTRAIN_MN_NODES:-3}
ntasks=$((nodes * 2))
command -v mpicc >/dev/null || fail "mpicc not found: run scripts/install-deps.sh"
id=
# What fail prints after its message: the end of each daemon's log, the job's record and, last
# (where a log's tail shows it), the job's output.
fail_context() {
  local f
  for f in "$(dirname "$SLURM_CONF")"/log/*.log "$(dirname "$SLURM_CONF")"/log/*.stderr; do
    [[ -s $f ]] && { echo "--- $f"; tail -n 15 "$f"; }
  done
  [[ -n $id ]] && { echo "--- scontrol show job $id"; scontrol show job "$id" 2>&1 | head -n 30; }
  [[ -f $work/job.out ]] && { echo "--- job output"; tail -n 30 "$work/job.out"; }
}

# Every task: "task PROCID HOSTNAME ETH0-ADDRESS" (write) or "tmp PROCID HOSTNAME MARKERS" (list).
cat > "$work/probe.sh" <<'SH'
#!/bin/sh
set -eu
mark=/tmp/hpctrain-mn-$SLURM_JOB_ID
case $1 in
  write)
    mkdir -p "$mark"
    : > "$mark/$SLURM_PROCID"
    ip=$(ip -4 -o addr show dev eth0 | awk '{split($4, a, "/"); print a[1]}')
    echo "task $SLURM_PROCID $(hostname) ${ip:-none}" ;;
  list)
    echo "tmp $SLURM_PROCID $(hostname) $(ls "$mark" | sort -n | tr '\n' ',')" ;;
esac
SH
chmod +x "$work/probe.sh"

cat > "$work/allreduce.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
  int rank, size, len;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  long mine = rank + 1, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  printf("mpi %s %d %d %s %ld\n", argc > 1 ? argv[1] : "1", rank, size, host, sum);
  MPI_Finalize();
  return 0;
}
C
mpicc -O1 -o "$work/allreduce" "$work/allreduce.c" || fail "mpicc failed"

# Steps one after another, so every task has written its marker before any task lists /tmp.
# Open MPI's own start-up has crashed once in a loaded CI run (a task died by SIGSEGV in the
# all-reduce step, on a cluster whose other steps had all run): the all-reduce runs a second time
# after such a failure, saying so, and the checks below read the last run's lines.
cat > "$work/job.sh" <<SH
#!/bin/sh
set -eu
srun --mpi=pmix "$work/probe.sh" write
srun --mpi=pmix "$work/probe.sh" list
if ! srun --mpi=pmix "$work/allreduce" 1; then
  echo "note: the Open MPI all-reduce step failed; running it again"
  srun --mpi=pmix "$work/allreduce" 2
fi
SH
out=$work/job.out
id=$(sbatch --parsable -N "$nodes" --ntasks-per-node=2 --time=5 -J hpctrain-multinode \
  -o "$out" "$work/job.sh") || fail "sbatch failed"
[[ $id =~ ^[0-9]+$ ]] || fail "sbatch printed '$id', not a job id"
submitted+=("$id")
job_state() { scontrol show job "$id" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_ended() { [[ $(job_state) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY)$ ]]; }
wait_for 240 "end of job $id" job_ended
echo "--- job $id: $(job_state)"; cat "$out"
[[ $(job_state) == COMPLETED ]] || fail "job $id ended $(job_state)"

# Placement: ntasks tasks, ranks 0..ntasks-1 once each, on node1..nodeN, two per node.
[[ $(grep -c '^task ' "$out") -eq $ntasks ]] || fail "expected $ntasks tasks"
[[ $(awk '/^task /{print $2}' "$out" | sort -n | tr '\n' ' ') == "$(seq -s ' ' 0 $((ntasks - 1))) " ]] \
  || fail "ranks are not 0..$((ntasks - 1)) once each"
[[ $(awk '/^task /{print $3}' "$out" | sort -uV | tr '\n' ' ') == "$(seq -f 'node%g' -s ' ' 1 "$nodes") " ]] \
  || fail "tasks did not land on node1..node$nodes"
awk '/^task /{n[$3]++} END {for (h in n) if (n[h] != 2) exit 1}' "$out" \
  || fail "not two tasks per node"
# Addresses: one per node, distinct, not loopback.
[[ $(awk '/^task /{print $3, $4}' "$out" | sort -u | wc -l) -eq $nodes ]] \
  || fail "tasks on one node report different addresses"
[[ $(awk '/^task /{print $4}' "$out" | sort -u | grep -c '^10\.') -eq $nodes ]] \
  || fail "expected $nodes distinct eth0 addresses"

# /tmp: every task sees exactly the markers of the tasks on its own node.
[[ $(grep -c '^tmp ' "$out") -eq $ntasks ]] || fail "expected $ntasks /tmp listings"
while read -r _ rank host seen; do
  want=$(awk -v h="$host" '/^task / && $3 == h {print $2}' "$out" | sort -n | tr '\n' ',')
  [[ $seen == "$want" ]] \
    || fail "rank $rank on $host sees /tmp markers $seen, expected only its node's: $want"
done < <(grep '^tmp ' "$out")

# Open MPI across the nodes: every rank gets 1 + ... + ntasks (the last run's lines).
sum=$((ntasks * (ntasks + 1) / 2))
run=$(awk '/^mpi /{r = $2} END {print r}' "$out")
grep -q '^note: the Open MPI' "$out" && echo "the all-reduce ran twice: its first run failed (above)"
[[ $(awk -v r="$run" -v n="$ntasks" -v s="$sum" '/^mpi / && $2 == r && $4 == n && $6 == s' "$out" \
  | wc -l) -eq $ntasks ]] || fail "all-reduce: expected $ntasks ranks of $ntasks with sum $sum"
[[ $(awk -v r="$run" '/^mpi / && $2 == r {print $5}' "$out" | sort -u | wc -l) -eq $nodes ]] \
  || fail "all-reduce ranks did not span $nodes hosts"

# A client in the root namespace reaches the nodes too (srun's I/O sockets on the bridge).
hosts=$(timeout 60 srun -N "$nodes" --ntasks-per-node=1 --mpi=pmix hostname | sort -V | tr '\n' ' ') \
  || fail "srun from the root namespace failed"
[[ $hosts == "$(seq -f 'node%g' -s ' ' 1 "$nodes") " ]] || fail "srun from the root namespace ran on: $hosts"
echo "PASS: $ntasks tasks on $nodes nodes, private /tmp, all-reduce sum $sum"
