#!/usr/bin/env bash
# Training on JPEG samples (dataset format version 2), with real worker processes on this machine:
# 96 photo-like JPEGs of many sizes made with PIL, converted by hpctrain-data folder --jpeg into
# 2 shards (and a validation shard), trained at 2 ranks with random-resized-crop to 32 px:
#  1. uninterrupted vs stopped by SIGUSR2 at a random step and resumed: bitwise equal weights
#     (the JPEG loader's position and augmentation resume exactly), evaluation ran;
#  2. a sample whose JPEG is damaged inside a shard stops the run naming the shard and sample;
#     with [data] skip_corrupt = true the run completes and the rank's log names the sample.
#   jpeg_train.sh WORKER HPCTRAIN_DATA PYTHON
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"
data_tool=$2
python=$3

"$python" - "$work/images" <<'PY' || fail "making the JPEGs"
import sys
from pathlib import Path
import numpy as np
from PIL import Image
root = Path(sys.argv[1])
rng = np.random.default_rng(5)
for i in range(96):
    cls = i % 4
    h, w = int(rng.integers(40, 90)), int(rng.integers(40, 90))
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([np.sin(xx / (4 + cls) + c) * np.cos(yy / (5 + c)) for c in range(3)], -1)
    px = np.clip(128 + 90 * base + rng.normal(0, 10, (h, w, 3)), 0, 255).astype(np.uint8)
    d = root / f"class{cls}"
    d.mkdir(parents=True, exist_ok=True)
    Image.fromarray(px).save(d / f"img{i:03d}.jpg", quality=90)
PY
"$data_tool" folder "$work/images" --jpeg --shards 2 -o "$work/data/train" -q > "$work/convert.out" \
  || fail "conversion: $(cat "$work/convert.out")"
"$data_tool" folder "$work/images" --jpeg --shards 1 -o "$work/data/val" -q > /dev/null \
  || fail "validation conversion"
[[ $(ls "$work"/data/train-*.h5 | wc -l) == 2 ]] || fail "expected 2 training shards"

jpeg_spec() {  # jpeg_spec NAME [KEY=VALUE...]: 2 epochs of 6 steps at 2 ranks x 8
  local name=$1
  shift
  synthetic_spec job.name="$name" job.tasks_per_node=2 job.run_dir="$work/$name" \
    data.synthetic=false data.train="$work/data/train-*.h5" data.val="$work/data/val-*.h5" \
    data.augment=random_resized_crop data.image_size=32 model.arch=resnet18 model.stem=cifar \
    model.num_classes=4 train.epochs=2 train.batch_size=8 train.threads=1 \
    train.log_every_steps=2 train.eval_every_epochs=1 train.optimizer.lr=0.05 \
    checkpoint.every_steps=4 "$@" > "$work/$name.toml"
}

# 1. uninterrupted vs stopped and resumed.
jpeg_spec straight
launch straight 2 "$work/straight.log"
finish; [[ $statuses == "0 0" ]] || fail "uninterrupted run exited '$statuses'"
grep -q "on 96 JPEG images up to" "$work/straight.log.rank0" || fail "the run did not say it reads JPEG samples"
grep -qE "top-1" "$work/straight.log.rank0" || fail "no evaluation on the JPEG validation shard"
want=$(fingerprint "$work/straight.log")
[[ -n $want ]] || fail "no fingerprint"
jpeg_spec stopped
launch_to_stop stopped 2 "$work/stopped.log" $((1 + RANDOM % 9))  # of 12
finish
[[ $statuses == "75 75" ]] || fail "stopped run exited '$statuses', want '75 75'"
launch stopped 2 "$work/stopped.log"
finish; [[ $statuses == "0 0" ]] || fail "resumed run exited '$statuses'"
grep -q "resuming from checkpoint step" "$work/stopped.log.rank0" || fail "did not resume"
got=$(fingerprint "$work/stopped.log")
echo "JPEG run: uninterrupted $want, stopped and resumed $got"
[[ $got == "$want" ]] || fail "resumed weights differ from the uninterrupted run's"

# 2. a damaged sample inside a shard: sample 3 of the first shard loses its start-of-image marker
# (damage further in may fall in rows a crop never decodes).
cp "$work/data/train-00000-of-00002.h5" "$work/shard0.h5"
"$python" - "$work/data/train-00000-of-00002.h5" <<'PY' || fail "damaging a sample"
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    a = int(f["offsets"][3])
    f["encoded"][a:a + 2] = np.zeros(2, np.uint8)
PY
jpeg_spec broken train.epochs=1
launch broken 2 "$work/broken.log"
finish
[[ $statuses != "0 0" ]] || fail "a damaged JPEG trained without a word"
grep -q "train-00000-of-00002.h5: sample 3: JPEG" "$work"/broken.log.rank? \
  || fail "the error does not name the shard and sample"
jpeg_spec skipping train.epochs=1 data.skip_corrupt=true
launch skipping 2 "$work/skipping.log"
finish; [[ $statuses == "0 0" ]] || fail "skip_corrupt run exited '$statuses'"
grep -q "skipped a sample that does not decode: .*train-00000-of-00002.h5: sample 3" \
  "$work"/skipping.log.rank? || fail "the skipped sample is not named in a rank's log"
echo "ok: a damaged sample stops the run naming it, or is skipped and named with skip_corrupt"
