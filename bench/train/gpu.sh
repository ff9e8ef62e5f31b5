#!/usr/bin/env bash
# The GPU training benchmark (run by scripts/gpu-check.sh on a machine with an NVIDIA GPU): one
# rank, ResNet-50 (torchvision's), batch 256, channels_last, fp16 (loss scaling) and bf16, on
# synthetic data and on an HDF5 file of random 224x224 images; hpctrain-worker against PyTorch
# eager AMP (bench/train/peer_train.py) on the same GPU in the same run. Prints a Markdown table
# with images/s, the ratio, and peak host memory.
#   bench/train/gpu.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: gpu.sh BUILD_DIR}" && pwd)
python=$(command -v python3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steps=${STEPS:-40}
workers=${WORKERS:-$(( $(nproc) - 2 ))}

"$build/bin/hpctrain-data" synthetic --samples 2560 --size 224 --classes 1000 --seed 1 -q \
  -o "$tmp/images.h5" > /dev/null

ours() {  # ours PRECISION SOURCE(synthetic|hdf5)
  local data
  if [[ $2 == synthetic ]]; then
    data=$'synthetic = true\nsynthetic_samples = 2560\nsynthetic_image_size = 224'
  else
    data="train = \"$tmp/images.h5\""
  fi
  cat > "$tmp/$1-$2.toml" <<TOML
[job]
name = "gpu-$1-$2"
gpus_per_node = 1
run_dir = "$tmp/run-$1-$2"
[data]
$data
workers = $workers
augment = "none"
[model]
arch = "resnet50"
num_classes = 1000
[train]
max_steps = $steps
batch_size = 256
precision = "$1"
channels_last = true
log_every_steps = 10
eval_every_epochs = 0
[checkpoint]
every_steps = 0
[preemption]
enabled = false
TOML
  "$build/bin/hpctrain-worker" --spec "$tmp/$1-$2.toml" > "$tmp/$1-$2.log" 2>&1
  jq -s '[.[] | select(.kind == "train")] | .[1:] | map(.images_per_s) | sort | .[length / 2 | floor]' \
    "$tmp/run-$1-$2/metrics.jsonl"
}

echo "## GPU: ResNet-50, batch 256, channels_last, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1), $(date -u +%F)"
echo
echo "| precision | data | hpctrain (img/s) | PyTorch eager AMP (img/s) | ratio |"
echo "|---|---|---:|---:|---:|"
for precision in fp16 bf16; do
  peer=$("$python" "$root/bench/train/peer_train.py" synthetic --arch resnet50 --stem imagenet \
    --classes 1000 --size 224 --batch 256 --precision "$precision" --channels-last --device cuda \
    --steps "$steps" --samples 1024 | tail -n 1 | grep -oE 'images_per_s=[0-9.]+' | cut -d= -f2)
  for source in synthetic hdf5; do
    o=$(ours "$precision" "$source")
    awk -v p="$precision" -v s="$source" -v o="$o" -v q="$peer" \
      'BEGIN { printf "| %s | %s | %.0f | %.0f | %.2f |\n", p, s, o, q, o / q }'
  done
done
