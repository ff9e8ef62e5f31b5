#!/usr/bin/env bash
# Runs the many-rank emulator (bench/scale/emulate.cpp; bench/scale/README.md "The emulator") for
# each count in COUNTS (default 1024 4096 10240), printing each run's JSON line and then a table.
#   bench/scale/emulate.sh [BUILD_DIR]           # build/bin/hpctrain-emulate
#   COUNTS="1024" PER_NODE=8 TIMEOUT=10 STEADY=10 bench/scale/emulate.sh build
#   KEEP=/var/tmp/emu bench/scale/emulate.sh     # keep the JSON lines there
# c10d's client looks up the name of its socket's v4-mapped address (::ffff:127.0.0.1) when it
# connects; on a machine whose DNS server does not answer, thousands of ranks connecting at once
# wait for the resolver's timeout (5 s each, in steps). As root the emulator runs in a mount
# namespace of its own whose /etc/hosts names that address, so no lookup leaves the machine (a
# real cluster's DNS answers); elsewhere RES_OPTIONS shortens the wait and the start-up figures
# carry it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
emulate=${EMULATE:-$build/bin/hpctrain-emulate}
[[ -x $emulate ]] || { echo "emulate.sh: no $emulate (build the CUDA or CPU build first)" >&2; exit 2; }
counts=${COUNTS:-1024 4096 10240}
keep=${KEEP:-$(mktemp -d /var/tmp/hpctrain-emulate.XXXXXX)}
mkdir -p "$keep"
work=$(mktemp -d /var/tmp/hpctrain-emulate-dir.XXXXXX)
trap 'rm -rf "$work"' EXIT

run() {
  local n=$1
  local args=(--ranks "$n" --per-node "${PER_NODE:-8}" --timeout "${TIMEOUT:-10}"
              --steady "${STEADY:-10}" --dir "$work/$n" --writers "${WRITERS:-16}")
  if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null; then
    cp /etc/hosts "$work/hosts"
    grep -q '^::ffff:127.0.0.1' "$work/hosts" || echo '::ffff:127.0.0.1 localhost' >> "$work/hosts"
    unshare --mount bash -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' _ \
      "$work/hosts" "$emulate" "${args[@]}"
  else
    RES_OPTIONS="timeout:1 attempts:1" "$emulate" "${args[@]}"
  fi
}

for n in $counts; do
  echo "==> $n ranks, ${PER_NODE:-8} per node ($(date -u +%H:%M:%S))" >&2
  run "$n" 2> >(grep -v 'hostname of the client socket cannot be retrieved' | tail -n 20 >&2) |
    tee -a "$keep/emulate.jsonl"
done
python3 "$root/bench/scale/emulate_table.py" "$keep/emulate.jsonl"
echo "JSON lines: $keep/emulate.jsonl" >&2
