#!/usr/bin/env bash
# Start-up across nodes: the 8-node namespace cluster of scripts/slurm-multinode.sh (each node a
# network namespace with its own address, hostname and slurmd; all on this machine's cores), srun
# launching PER_NODE ranks on each of NODES nodes. Per count, alternating, REPS times each:
#   ours  srun hpctrain-worker --selftest --selftest-max-bytes 8 (the worker finds its rank, the
#         rendezvous host and a port derived from the step from Slurm's variables);
#   peer  srun bench/scale/peer_init.py 8 (init_process_group("gloo", env://) and the same
#         collectives), RANK/WORLD_SIZE/MASTER_ADDR set from Slurm's variables as a DDP user does.
# Reports srun's wall time (p50), from the launch to the last rank's exit: launch fan-out, process
# start, rendezvous, the backend's wire-up and the collectives, across real (virtual) links.
#   bench/scale/namespace.sh [BUILD_DIR]   (root). Environment: NODES (8), PER_NODE ("1 2 4"),
#   REPS (3), BENCH_DIR (/var/tmp/hpctrain-bench-scale-ns), PYTHON (the venv's python3, an
#   absolute path: the nodes run it).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$repo/build}
nodes=${NODES:-8}
per_node=${PER_NODE:-1 2 4}
reps=${REPS:-3}
dir=${BENCH_DIR:-/var/tmp/hpctrain-bench-scale-ns}
# The venv's own path (its python is a link to the system's: resolving it would lose the venv).
python=${PYTHON:-$(readlink -f "$repo/.venv")/bin/python3}
mn=$repo/scripts/slurm-multinode.sh
[[ -x $build/bin/hpctrain-worker ]] || { echo "build hpctrain-worker in $build" >&2; exit 2; }
rm -rf "$dir"
mkdir -p "$dir/bin"
cp "$build/bin/hpctrain-worker" "$repo/bench/scale/peer_init.py" "$dir/bin/"
trap '"$mn" stop "$dir/cluster" > /dev/null 2>&1' EXIT
HPCTRAIN_SLURM_CPUS=4 "$mn" start "$dir/cluster" "$nodes" > "$dir/cluster.log" 2>&1 ||
  { echo "cluster: $(tail "$dir/cluster.log")" >&2; exit 1; }
export SLURM_CONF=$dir/cluster/slurm.conf
cat > "$dir/bin/peer.sh" <<SH
#!/bin/bash
export RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS LOCAL_RANK=\$SLURM_LOCALID
export LOCAL_WORLD_SIZE=\$SLURM_NTASKS_PER_NODE MASTER_PORT=\$((29500 + SLURM_STEP_ID % 1000))
export MASTER_ADDR=\$(scontrol show hostnames "\$SLURM_STEP_NODELIST" | head -n 1)
exec "$python" "$dir/bin/peer_init.py" 8
SH
chmod +x "$dir/bin/peer.sh"
: > "$dir/results.txt"
run() {  # run SIDE TASKS_PER_NODE: one srun; appends "SIDE RANKS SECONDS STATUS"
  local side=$1 tpn=$2 t0 t1 status=0 cmd
  if [[ $side == ours ]]; then cmd=("$dir/bin/hpctrain-worker" --selftest --selftest-max-bytes 8)
  else cmd=("$dir/bin/peer.sh"); fi
  t0=$(date +%s.%N)
  timeout 600 srun -N "$nodes" --ntasks-per-node="$tpn" --cpus-per-task=1 -t 10 \
    "${cmd[@]}" > "$dir/$side-$tpn.out" 2> "$dir/$side-$tpn.err" || status=$?
  t1=$(date +%s.%N)
  awk -v s="$side" -v n="$((nodes * tpn))" -v a="$t0" -v b="$t1" -v st="$status" \
    'BEGIN { printf "%s %d %.2f %d\n", s, n, b - a, st }' >> "$dir/results.txt"
}
for tpn in $per_node; do
  for rep in $(seq 1 "$reps"); do run ours "$tpn"; run peer "$tpn"; done
done
echo "## Start-up on $nodes namespace nodes ($(date -u +%F), $(nproc) cores, srun, p50 of $reps)"
echo
echo "| ranks | ranks per node | ours s | peer s | peer/ours | failed runs (ours, peer) |"
echo "|---:|---:|---:|---:|---:|---|"
p50() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for tpn in $per_node; do
  n=$((nodes * tpn))
  ours=$(awk -v n="$n" '$1 == "ours" && $2 == n && $4 == 0 {print $3}' "$dir/results.txt" | p50)
  peer=$(awk -v n="$n" '$1 == "peer" && $2 == n && $4 == 0 {print $3}' "$dir/results.txt" | p50)
  bad_o=$(awk -v n="$n" '$1 == "ours" && $2 == n && $4 != 0' "$dir/results.txt" | wc -l)
  bad_p=$(awk -v n="$n" '$1 == "peer" && $2 == n && $4 != 0' "$dir/results.txt" | wc -l)
  ratio=$(awk -v a="${ours:-0}" -v b="${peer:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", b / a; else print "-" }')
  echo "| $n | $tpn | ${ours:--} | ${peer:--} | $ratio | $bad_o, $bad_p |"
done
