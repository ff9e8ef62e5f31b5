#!/usr/bin/env bash
# Start-up at scale on one machine: N ranks as processes on 127.0.0.1 (torchrun's variables), for
# N in $COUNTS, three sides alternating within each repetition:
#   ours      hpctrain-worker --selftest --selftest-max-bytes 8 (rendezvous on rank 0's TCPStore,
#             Gloo, checked all-reduces and broadcasts, a barrier, an 8-byte table row);
#   peer      bench/scale/peer_init.py: torch.distributed.init_process_group("gloo", env://) and
#             the same collectives in the same order, started the same way;
#   torchrun  the same script under python -m torch.distributed.run --nproc-per-node N (what a
#             torchrun user pays: the agent, its store, its process start).
# Per run (bench/scale/launch.py): wall seconds until every rank exited, seconds until rank 0's
# first line (after the checks and the barrier, on both sides), our rendezvous time, the peer's
# own init and first all-reduce times, memory per rank (PSS, peak RSS) and threads. A count whose
# predicted memory (PSS per rank measured at the previous count x N) exceeds the budget is not run
# and says why. Then store_rtt.py: rank 0's heartbeat watch load against the measured store.
# Usage: bench/scale/run.sh [BUILD_DIR]    (default build); prints Markdown tables.
# Environment: COUNTS (default "2 8 32 64 128 256"), REPS (3; 2 at 64 ranks, 1 above),
# SIDES ("ours peer torchrun"), MEM_GIB (18: the most all processes of the machine may use),
# KEEP=DIR (keep the JSON lines and logs there), NO_STORE=1 (skip the store benchmark),
# PSS_FIRST=MiB (the PSS per rank to predict with before a side has been measured; 320).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
worker=$build/bin/hpctrain-worker
python=${PYTHON:-$root/.venv/bin/python}
here=$root/bench/scale
counts=${COUNTS:-2 8 32 64 128 256}
read -r -a side_list <<< "${SIDES:-ours peer torchrun}"
mem_gib=${MEM_GIB:-18}
[[ -x $worker ]] || { echo "no $worker: build first (cmake --build $build)" >&2; exit 2; }
tmp=${KEEP:-$(mktemp -d)}
mkdir -p "$tmp"
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$tmp"' EXIT
results=$tmp/results.jsonl
: > "$results"
ulimit -n "$(ulimit -Hn)"

# MiB the machine has in use now (all processes, not page cache).
used_mib() {
  awk '/^MemTotal:/ {t = $2} /^MemAvailable:/ {a = $2} END {printf "%d", (t - a) / 1024}' \
    /proc/meminfo
}
# The PSS per rank a side had at its largest count so far (JSON lines), or a first guess.
pss_of() {
  "$python" - "$results" "$1" "${PSS_FIRST:-320}" <<'EOF'
import json, sys
best = (0, int(sys.argv[3]))  # before any measurement: a libtorch process, about 320 MiB
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("side") == sys.argv[2] and r.get("pss_per_rank_mb") and r["n"] >= best[0]:
        best = (r["n"], r["pss_per_rank_mb"])
print(best[1])
EOF
}

reps_for() {
  if [[ -n ${REPS:-} ]]; then echo "$REPS"
  elif (( $1 <= 32 )); then echo 3
  elif (( $1 <= 64 )); then echo 2
  else echo 1
  fi
}

run_side() {  # side n rep
  local side=$1 n=$2 rep=$3 logs=$tmp/$1-$2-$3
  local pss used budget need
  pss=$(pss_of "$side")
  used=$(used_mib)
  # What is in use now plus N ranks must stay under the budget, with 1 GiB to spare.
  budget=$(( mem_gib * 1024 - used - 1024 ))
  need=$(( n * pss ))
  if (( need > budget )); then
    awk -v n="$n" -v side="$side" -v rep="$rep" -v pss="$pss" -v need="$need" -v budget="$budget" \
        -v gib="$mem_gib" -v used="$used" 'BEGIN {
      printf "{\"n\": %d, \"side\": \"%s\", \"rep\": %d, \"not_run\": \"%d ranks x %d MiB PSS per rank = %.1f GiB > %.1f GiB free of the %d GiB budget (%.1f GiB in use)\"}\n",
        n, side, rep, n, pss, need / 1024, budget / 1024, gib, used / 1024 }' >> "$results"
    return
  fi
  local limit=$(( 120 + 4 * n ))
  case $side in
    ours) "$python" "$here/launch.py" --n "$n" --side ours --rep "$rep" --observe-hosts \
            --logs "$logs" --timeout-s "$limit" -- "$worker" --selftest --selftest-max-bytes 8 ;;
    peer) "$python" "$here/launch.py" --n "$n" --side peer --rep "$rep" --logs "$logs" \
            --timeout-s "$limit" -- "$python" "$here/peer_init.py" 8 ;;
    torchrun) "$python" "$here/launch.py" --n "$n" --side torchrun --rep "$rep" --torchrun \
                --python "$python" --logs "$logs" --timeout-s "$limit" -- "$here/peer_init.py" 8 ;;
  esac >> "$results"
  tail -n 1 "$results" >&2
}

for n in $counts; do
  reps=$(reps_for "$n")
  for rep in $(seq 1 "$reps"); do
    # Alternate the sides within each repetition, starting with another side each time.
    for ((k = 0; k < ${#side_list[@]}; k++)); do
      run_side "${side_list[(k + rep - 1) % ${#side_list[@]}]}" "$n" "$rep"
    done
  done
done

echo "## Start-up at scale: N ranks as processes on $(hostname) ($(nproc) cores, $(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1048576 )) GiB), $(date -u +%F)"
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); torch $("$python" -c 'import torch; print(torch.__version__)')"
echo
"$python" "$here/report.py" "$results"
if [[ -z ${NO_STORE:-} ]]; then
  echo
  "$python" "$here/store_rtt.py"
fi
