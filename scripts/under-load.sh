#!/usr/bin/env bash
# Runs ctest tests over and over beside a busy loop on every core, to find tests that fail by
# chance when the machine is loaded (a build, another job). Stops a test at its first failure
# and keeps that run's output.
#
#   scripts/under-load.sh [--build DIR] [--runs N] [--busy N] [--out DIR] TEST...
#   scripts/under-load.sh [--runs N] [--busy N] [--out DIR] -- COMMAND [ARG...]
#
# TEST is a ctest name (an exact match). The second form runs a command instead (a test script
# given a copy of the binaries, so that the build directory stays free for rebuilding). Each runs
# N times (default 20) in a row, one after another, beside N busy loops (default: one per core).
# The summary is DIR/summary.txt (default /tmp/hpctrain-under-load): one line per run with its
# time and the load average. Exit status 0 when every run passed.
set -euo pipefail

build=build runs=20 out=/tmp/hpctrain-under-load busy_loops=$(nproc) command=()
while (( $# )); do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --busy) busy_loops=$2; shift 2 ;;
    --) shift; command=("$@"); set -- "$(basename "$1")"; break ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    --*) echo "under-load.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
(( $# )) || { echo "under-load.sh: name at least one ctest test, or -- COMMAND" >&2; exit 2; }
if (( ! ${#command[@]} )) && [[ ! -f $build/CTestTestfile.cmake ]]; then
  echo "under-load.sh: $build is not a build directory" >&2; exit 2
fi
mkdir -p "$out"

busy=()
stop_busy() { (( ${#busy[@]} )) && kill "${busy[@]}" 2> /dev/null; true; }
trap stop_busy EXIT
for _ in $(seq "$busy_loops"); do
  ( while :; do :; done ) &
  busy+=($!)
done

failed=0
for name in "$@"; do
  for i in $(seq "$runs"); do
    t0=$(date +%s)
    log=$out/$name.$i.log
    if (( ${#command[@]} )); then
      timeout 1800 "${command[@]}" > "$log" 2>&1 && result=pass || result=fail
    else
      ctest --test-dir "$build" -R "^${name}\$" --output-on-failure > "$log" 2>&1 \
        && grep -q '100% tests passed' "$log" && result=pass || result=fail
    fi
    if [[ $result == pass ]]; then
      rm -f "$log"
    else
      result="FAIL (output in $log)"
    fi
    echo "$(date -u +%H:%M:%S) $name run $i/$runs: $result in $(( $(date +%s) - t0 )) s," \
      "load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$out/summary.txt"
    if [[ $result != pass ]]; then failed=1; break; fi
  done
done
exit "$failed"
