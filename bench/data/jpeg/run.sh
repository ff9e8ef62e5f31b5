#!/usr/bin/env bash
# The JPEG benchmark, side by side on the same files (bench/data/jpeg/README.md):
#   converter: hpctrain-data folder --jpeg (1 and 2 threads) vs convert_pil.py (one process);
#   loader: decode + random-resized-crop 224 + flip, uint8 and float output, at 1 and 2 threads:
#   hpctrain (bench_jpeg) vs the DataLoader with PIL (workers 0, 1, 2) vs DALI's CPU pipeline.
#   bench/data/jpeg/run.sh BUILD_DIR [IMAGES_DIR] [--quick]
# IMAGES_DIR defaults to /var/tmp/hpctrain-jpeg-bench/images (make_jpegs.py makes it); DALI's
# venv is /root/.cache/hpctrain/venv-dali (README). Results: one JSON line per run on stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR [IMAGES_DIR] [--quick]}
images=${2:-/var/tmp/hpctrain-jpeg-bench/images}
n=4000
[[ ${3:-} == --quick ]] && n=600
py=$root/.venv/bin/python
dali=/root/.cache/hpctrain/venv-dali/bin/python
work=$(mktemp -d /var/tmp/hpctrain-jpeg-run.XXXXXX)
trap 'rm -rf "$work"' EXIT

for t in 1 2; do
  out=$("$build/bin/hpctrain-data" folder "$images" -o "$work/conv$t/train" --jpeg --max-side 500 \
        --shard-size 1250 --threads "$t" -q)
  rate=$(sed -n 's/.* with [0-9]* threads, \([0-9.]*\) images\/s/\1/p' <<<"$out")
  bpi=$(sed -n 's/^bytes per image \([0-9]*\).*/\1/p' <<<"$out")
  echo "{\"peer\":\"hpctrain_convert\",\"threads\":$t,\"images_per_s\":$rate,\"bytes_per_image\":$bpi}"
done
"$py" "$here/convert_pil.py" "$images" "$work/pil.h5" --max-side 500 --quality 90
rm -rf "$work"/conv2 "$work/pil.h5"
data="$work/conv1/train-*.h5"

for float in "" --float; do
  for t in 1 2; do
    "$build/bin/bench_jpeg" --data "$data" --threads "$t" --images "$n" $float
    [[ -x $dali ]] && "$dali" "$here/peer_dali.py" "$images" --threads "$t" --images "$n" $float
  done
  for w in 0 1 2; do
    "$py" "$here/peer_dataloader.py" "$images" --workers "$w" --images "$n" $float
  done
done
