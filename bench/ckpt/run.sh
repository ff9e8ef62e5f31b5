#!/usr/bin/env bash
# Checkpoint write throughput: hpctrain's checkpoint store (write_part + commit of FILES files,
# world size 1: every file and directory fsynced, XXH3 computed, manifest committed) against
# `dd if=/dev/zero bs=4M conv=fsync` of the same bytes to the same filesystem. Rounds alternate
# (the store first in odd rounds, dd first in even ones); each side's median over the rounds
# gives the ratio (target >= 0.8). Also the peak resident memory of the store's driver, whose
# payload (the trainer's host snapshot) is part of it. Then, in the same run, the training stall
# per asynchronous save against a synchronous one (bench/ckpt/stall.sh; SKIP_STALL=1 leaves it out).
#   bench/ckpt/run.sh [BUILD_DIR]    (default build; needs the bench_ckpt and hpctrain-worker targets)
# Environment: BENCH_DIR (default /var/tmp/hpctrain-bench-ckpt), SIZES_MIB ("256 1024"),
# ROUNDS (5), FILES (4). Prints Markdown.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$repo/build}
bench=$build/bin/bench_ckpt
dir=${BENCH_DIR:-/var/tmp/hpctrain-bench-ckpt}
sizes=${SIZES_MIB:-256 1024}
rounds=${ROUNDS:-5}
files=${FILES:-4}
[[ -x $bench ]] || { echo "no $bench: cmake --build $build --target bench_ckpt" >&2; exit 2; }
rm -rf "$dir"
mkdir -p -m 700 "$dir"
results=$(mktemp)
trap 'rm -rf "$dir" "$results"' EXIT

ours() {  # size_mib round
  local run=$dir/run
  mkdir -m 700 "$run"
  "$bench" --dir "$run" --bytes $(($1 << 20)) --files "$files" --step "$2" |
    jq -r --arg s "$1" --arg r "$2" '"\($s) \($r) ours \(.total_s) \(.peak_rss_mib)"' >> "$results"
  rm -rf "$run"
  sync
}
dd_round() {  # size_mib round
  local line
  line=$(dd if=/dev/zero of="$dir/dd.bin" bs=4M count=$(($1 / 4)) conv=fsync 2>&1 | tail -n 1)
  # "268435456 bytes (268 MB, 256 MiB) copied, 0.959871 s, 280 MB/s"
  echo "$1 $2 dd $(sed -n 's/.* copied, \([0-9.e+-]*\) s,.*/\1/p' <<< "$line") 0" >> "$results"
  rm -f "$dir/dd.bin"
  sync
}

for size in $sizes; do
  for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then
      ours "$size" "$r"
      dd_round "$size" "$r"
    else
      dd_round "$size" "$r"
      ours "$size" "$r"
    fi
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "## Checkpoint write throughput on $(hostname) ($(nproc) cores), $(date -u +%F)"
echo
echo "Filesystem: $(df --output=fstype "$dir" | tail -n 1) ($(df --output=source "$dir" | tail -n 1)), $dir;" \
     "$files files per checkpoint, $rounds alternating rounds, medians; MiB/s = MiB / seconds."
echo
echo "| MiB | store s (rounds) | dd s (rounds) | store MiB/s | dd MiB/s | store / dd | driver peak RSS MiB |"
echo "|---:|---|---|---:|---:|---:|---:|"
for size in $sizes; do
  o=$(awk -v s="$size" '$1 == s && $3 == "ours" {print $4}' "$results")
  d=$(awk -v s="$size" '$1 == s && $3 == "dd" {print $4}' "$results")
  om=$(median <<< "$o")
  dm=$(median <<< "$d")
  rss=$(awk -v s="$size" '$1 == s && $3 == "ours" {print $5}' "$results" | sort -g | tail -n 1)
  awk -v s="$size" -v o="$(printf '%.2f ' $o | sed 's/ $//')" -v d="$(printf '%.2f ' $d | sed 's/ $//')" \
      -v om="$om" -v dm="$dm" -v rss="$rss" 'BEGIN {
    printf "| %d | %s | %s | %.0f | %.0f | %.2f | %.0f |\n", s, o, d, s / om, s / dm, dm / om, rss }'
done

if [[ ${SKIP_STALL:-0} != 1 ]]; then
  echo
  "$repo/bench/ckpt/stall.sh" "$build"
fi
