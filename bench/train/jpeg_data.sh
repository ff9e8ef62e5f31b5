#!/usr/bin/env bash
# The JPEG data of bench/train/gpu.sh's JPEG row: bench/data/jpeg/make_jpegs.py's set (COUNT
# images, seed 1, ImageFolder layout) in DIR/images, converted by `hpctrain-data folder --jpeg`
# into format version 2 shards DIR/v2/train-*.h5. Both sides train on the same files.
#   bench/train/jpeg_data.sh BUILD_DIR DIR
# COUNT (6144), PROCS (make_jpegs.py's processes, default nproc/2), THREADS (the converter's,
# default nproc), FASHION_DIR: where Fashion-MNIST's train-*-idx?-ubyte.gz are (default
# /usr/share/datasets/fashion-mnist; scripts/gpu-check.sh carries them in .gpu-debs/fashion-mnist).
# Prints one line: how long each part took.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: jpeg_data.sh BUILD_DIR DIR}" && pwd)
dir=${2:?usage: jpeg_data.sh BUILD_DIR DIR}
python=${PYTHON:-$(command -v python3)}
count=${COUNT:-6144}
procs=${PROCS:-$(( ($(nproc) + 1) / 2 ))}
threads=${THREADS:-$(nproc)}
fashion=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
[[ -f $fashion/train-images-idx3-ubyte.gz && -f $fashion/train-labels-idx1-ubyte.gz ]] \
  || { echo "jpeg_data.sh: no Fashion-MNIST train-*.gz in $fashion (set FASHION_DIR)" >&2; exit 1; }

rm -rf "$dir/images" "$dir/v2"
mkdir -p "$dir"
t0=$SECONDS
# make_jpegs.py reads Fashion-MNIST from a fixed path: run its main() with that path replaced
# (its worker processes are forked, so they inherit the module's value).
"$python" - "$root/bench/data/jpeg" "$fashion" "$dir/images" "$count" "$procs" <<'PY' >&2
import sys
here, fashion, out, count, procs = sys.argv[1:]
sys.path.insert(0, here)
import make_jpegs
make_jpegs.FASHION_DIR = fashion
sys.argv = ["make_jpegs.py", out, "--count", count, "--seed", "1", "--procs", procs]
make_jpegs.main()
PY
t1=$SECONDS
"$build/bin/hpctrain-data" folder "$dir/images" -o "$dir/v2/train" --jpeg --max-side 500 \
  --shard-size 1536 --threads "$threads" -q >&2
echo "jpeg data: $count images made in $((t1 - t0)) s ($procs processes), converted in" \
     "$((SECONDS - t1)) s ($threads threads): $dir/v2"
