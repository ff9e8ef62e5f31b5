#!/usr/bin/env bash
# Rank 0's file descriptors as the world grows, and what happens when they run out.
# Usage: bench/scale/fd_limit.sh [BUILD_DIR] N [LIMIT]
# Starts N hpctrain-worker --selftest ranks on 127.0.0.1; rank 0 runs under `ulimit -n LIMIT`
# (soft and hard limit) when LIMIT is given, under `ulimit -Sn LIMIT` (the soft limit only, which
# the worker raises to the hard one since 2026-11-25) with SOFT_ONLY=1. Prints rank 0's peak
# descriptor count (sampled every 50 ms), its exit status, how many other ranks failed, the first
# HEAD_BYTES (300) of rank 0's and rank 1's stderr, and how many other ranks printed nothing.
# Ranks still running 60 s after rank 0 ended are killed (SIGKILL) and counted as failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
n=${2:?N}
limit=${3:-0}
worker=$build/bin/hpctrain-worker
python=${PYTHON:-$root/.venv/bin/python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Plain `VAR=... cmd &`: $! is then the worker itself (a function or subshell would put a shell
# in between, which is not what the fd count or a kill must reach).
export WORLD_SIZE=$n LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port
pids=()
for ((r = 1; r < n; r++)); do
  RANK=$r LOCAL_RANK=$r "$worker" --selftest --selftest-max-bytes 8 > /dev/null 2> "$tmp/err-$r" &
  pids+=($!)
done
if (( limit > 0 )); then
  flag=-n
  [[ -n ${SOFT_ONLY:-} ]] && flag=-Sn
  RANK=0 LOCAL_RANK=0 bash -c "ulimit $flag $limit && exec \"\$0\" --selftest --selftest-max-bytes 8" \
    "$worker" > /dev/null 2> "$tmp/err-0" &
else
  RANK=0 LOCAL_RANK=0 "$worker" --selftest --selftest-max-bytes 8 > /dev/null 2> "$tmp/err-0" &
fi
rank0=$!
peak=0
while kill -0 "$rank0" 2> /dev/null; do
  count=$(find "/proc/$rank0/fd" -mindepth 1 2> /dev/null | wc -l)
  (( count > peak )) && peak=$count
  sleep 0.05
done
wait "$rank0"
rc0=$?
deadline=$((SECONDS + 60))
failed=0
for p in "${pids[@]}"; do
  while kill -0 "$p" 2> /dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  kill -0 "$p" 2> /dev/null && kill -KILL "$p"
  wait "$p" || failed=$((failed + 1))
done
echo "ranks $n, rank 0 limit ${limit/#0/none}${SOFT_ONLY:+ (soft only)}: rank 0 peak fds $peak, exit $rc0; other ranks failed: $failed of $((n - 1))"
echo "rank 0 stderr: $(head -c ${HEAD_BYTES:-300} "$tmp/err-0")"
echo "rank 1 stderr: $(head -c ${HEAD_BYTES:-300} "$tmp/err-1")"
silent=0
for ((r = 1; r < n; r++)); do [[ -s $tmp/err-$r ]] || silent=$((silent + 1)); done
echo "other ranks that printed nothing on stderr: $silent of $((n - 1))"
