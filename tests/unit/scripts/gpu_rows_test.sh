#!/usr/bin/env bash
# The GPU benchmark's record of its rows (bench/train/gpu.sh's ROWS_DONE) and what a second device
# call runs from it (scripts/gpu-check.sh bench, shown by bench-rows): no record, the first call's
# rows; a budget cut, the rows it left out, in their order; everything finished, the graphs
# table's eager sides; ROWS and GRAPHS_VS given, kept; a row that cannot run, finished at once.
# gpu.sh runs for real with DEVICE=cpu against a stand-in worker (one that fails at once, or one cut by the budget) and no peer python, so its
# rows end within seconds: what is tested is which rows it records as planned and as finished.
#   gpu_rows_test.sh SOURCE_DIR
set -uo pipefail
root=$(cd "${1:?usage: gpu_rows_test.sh SOURCE_DIR}" && pwd)
source "$root/tests/support/expect.sh"
tmp=$(mktemp -d /var/tmp/hpctrain-gpu-rows-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
record=$tmp/rows.txt
mkdir -p "$tmp/build/bin" "$tmp/cut/bin" "$tmp/jpeg/v2" "$tmp/jpeg/images"
printf '#!/bin/sh\nexit 3\n' > "$tmp/build/bin/hpctrain-worker"
printf '#!/bin/sh\nexec sleep 30\n' > "$tmp/cut/bin/hpctrain-worker"
chmod +x "$tmp/build/bin/hpctrain-worker" "$tmp/cut/bin/hpctrain-worker"

# picks [NAME=VALUE...]: what bench would run, with those variables.
picks() { env GPU_CHECK_ROWS_DONE="$record" "$@" bash "$root/scripts/gpu-check.sh" bench-rows; }
# bench BUILD ROWS [timeout]: gpu.sh's rows on the CPU, the record to $record; no peer (PYTHON=true
# prints nothing, so each peer run fails at once).
bench() {
  env DEVICE=cpu PYTHON=true ROWS="$2" GRAPHS_MODELS="resnet20:8:2 resnet18:8:2" \
    GRAPHS_PRECISIONS=fp32 GRAPHS_VS=eager JPEG_DIR="$tmp/jpeg" JPEG_WORKERS=1 ROWS_DONE="$record" \
    timeout -k 1 "${3:-120}" bash "$root/bench/train/gpu.sh" "$1" > "$tmp/bench.md" 2> "$tmp/bench.log"
}

expect 0 '^ROWS="graphs jpeg" GRAPHS_VS="default reduce-overhead"$' picks
expect 0 '^ROWS="jpeg" GRAPHS_VS=""$' picks ROWS=jpeg

# A call cut by its budget in its first row: every row planned, none finished.
bench "$tmp/cut" "graphs jpeg" 3
[[ $? == 124 ]] || check_failed "the cut gpu.sh did not time out; its log: $(cat "$tmp/bench.log")"
want=$'plan graphs-resnet20\nplan graphs-resnet18\nplan jpeg'
[[ $(cat "$record") == "$want" ]] || check_failed "the cut call's record: $(cat "$record")"
expect 0 '^ROWS="graphs-resnet20 graphs-resnet18 jpeg" GRAPHS_VS="default reduce-overhead"$' picks

# A second call finishes the first (its runs fail: a failed row is finished too, and not run again).
bench "$tmp/build" graphs-resnet20
[[ $? == 1 ]] || check_failed "gpu.sh with a failing worker did not exit 1; its log: $(cat "$tmp/bench.log")"
grep -qx 'done graphs-resnet20 status 1' "$record" \
  || check_failed "no 'done graphs-resnet20 status 1' in the record: $(cat "$record")"
expect 0 '^ROWS="graphs-resnet18 jpeg" GRAPHS_VS="default reduce-overhead"$' picks
# GRAPHS_VS given is kept.
expect 0 '^ROWS="graphs-resnet18 jpeg" GRAPHS_VS="none"$' picks GRAPHS_VS=none

bench "$tmp/build" "graphs-resnet18 jpeg"
for row in graphs-resnet18 jpeg; do
  grep -qx "done $row status 1" "$record" || check_failed "no 'done $row status 1': $(cat "$record")"
done
grep -q '^| fewest loader threads' "$tmp/bench.md" \
  || check_failed "the jpeg row printed no table: $(cat "$tmp/bench.md")"
expect 0 '^ROWS="graphs" GRAPHS_VS="eager none"$' picks

# A row that names no model, or no row at all, finishes at once with status 1 (it is not left
# for the next call).
bench "$tmp/build" "graphs-nosuch bogus"
[[ $? == 1 ]] || check_failed "gpu.sh with rows it cannot run did not exit 1"
for row in graphs-nosuch bogus; do
  grep -qx "done $row status 1" "$record" || check_failed "no 'done $row status 1': $(cat "$record")"
done
expect 0 '^ROWS="graphs" GRAPHS_VS="eager none"$' picks

# An unknown side is refused before any row is planned.
rm -f "$record"
env GRAPHS_VS="eager fast" ROWS_DONE="$record" DEVICE=cpu PYTHON=true \
  bash "$root/bench/train/gpu.sh" "$tmp/build" > /dev/null 2> "$tmp/bench.log"
[[ $? == 2 ]] || check_failed "GRAPHS_VS='eager fast' did not exit 2"
grep -q "unknown side 'fast'" "$tmp/bench.log" || check_failed "no error naming 'fast': $(cat "$tmp/bench.log")"
[[ ! -e $record ]] || check_failed "a refused GRAPHS_VS wrote a record: $(cat "$record")"
finish
