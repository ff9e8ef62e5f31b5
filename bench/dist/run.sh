#!/usr/bin/env bash
# Communication benchmarks, each side by side with its peer in the same run:
#  1. all-reduce bus bandwidth, Gloo, 2 ranks: hpctrain-worker --selftest against Python
#     torch.distributed (gloo) on the same sizes, same warmup and iteration counts; best of 2
#     alternating rounds each;
#  2. step time of data-parallel SGD (bench_ddp_step), 2 ranks: buckets overlapped with backward
#     against all-reduce after backward, alternating, best of 3 each.
# Usage: bench/dist/run.sh [BUILD_DIR]   (default build); prints Markdown tables.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
worker=$build/bin/hpctrain-worker
step=$build/bench/dist/bench_ddp_step
python=$root/.venv/bin/python
max_bytes=${MAX_BYTES:-$((64 << 20))}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# two_ranks OUT CMD...: runs CMD as ranks 0 and 1 (torchrun variables); rank 0's stdout to OUT.
two_ranks() {
  local out=$1; shift
  local port; port=$(free_port)
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$@" > /dev/null &
  local other=$!
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$@" > "$out"
  wait "$other"
}

for round in 1 2; do
  two_ranks "$tmp/ours-$round.txt" "$worker" --selftest --selftest-max-bytes "$max_bytes"
  two_ranks "$tmp/peer-$round.txt" "$python" "$root/bench/dist/peer_allreduce.py" "$max_bytes"
done
echo "## All-reduce, Gloo, 2 ranks on $(hostname) ($(nproc) cores), $(date -u +%F)"
echo
echo "Best of 2 alternating rounds each; busbw = algbw x 2(n-1)/n, which is algbw at n = 2;"
echo "speed ratio = torch.distributed time / hpctrain time (above 1: hpctrain faster)."
echo
echo "| bytes | hpctrain (us) | torch.distributed (us) | hpctrain busbw (GB/s) | torch.distributed busbw (GB/s) | speed ratio |"
echo "|---:|---:|---:|---:|---:|---:|"
for size in $(awk '/^ *[0-9]/ {print $1}' "$tmp/ours-1.txt"); do
  # Best (lowest) time of the rounds for each side; our table: size count type redop time algbw
  # busbw wrong; the peer's: size time busbw.
  ours=$(awk -v s="$size" '$1 == s {print $5}' "$tmp"/ours-*.txt | sort -g | head -n 1)
  peer=$(awk -v s="$size" '$1 == s {print $2}' "$tmp"/peer-*.txt | sort -g | head -n 1)
  awk -v s="$size" -v o="$ours" -v p="$peer" 'BEGIN {
    printf "| %d | %.1f | %.1f | %.4f | %.4f | %.2f |\n", s, o, p, s / o / 1e3, s / p / 1e3, p / o }'
done
echo
for round in 1 2 3; do
  two_ranks "$tmp/overlap-$round.json" "$step" --steps 15
  two_ranks "$tmp/flat-$round.json" "$step" --steps 15 --no-overlap
done
best() { jq -s 'map(.step_ms) | min' "$@"; }
o=$(best "$tmp"/overlap-*.json)
f=$(best "$tmp"/flat-*.json)
params=$(jq .params "$tmp/overlap-1.json")
buckets=$(jq .buckets "$tmp/overlap-1.json")
echo "## Step time, 2 ranks, $params parameters in $buckets buckets of 25 MB (best of 3)"
echo
echo "| all-reduce | step (ms) |"
echo "|---|---:|"
echo "| overlapped with backward | $o |"
echo "| after backward | $f |"
awk -v o="$o" -v f="$f" 'BEGIN { printf "\nafter-backward / overlapped = %.2f\n", f / o }'
