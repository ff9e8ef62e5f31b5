#!/usr/bin/env bash
# The training stall per checkpoint, synchronous against asynchronous (checkpoint.async), in the
# same run: hpctrain-worker, one rank, ResNet-50 (25.6M parameters: model.pt ~98 MiB and SGD
# momentum ~98 MiB per checkpoint) on synthetic 32x32 data, a checkpoint every 4 steps. The
# worker prints how long each save held the training thread ("training stalled X s": the whole
# write and commit when synchronous; the snapshot to memory when asynchronous); the median of
# each side and their ratio (target <= 0.10) are reported, beside the median step time and each
# side's peak resident memory (the asynchronous side keeps its host snapshot buffers).
#   bench/ckpt/stall.sh [BUILD_DIR]   (ROUNDS=2, STEPS=24)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${ROUNDS:-2}
steps=${STEPS:-24}
tmp=$(mktemp -d /var/tmp/hpctrain-bench-stall.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
source "$root/tests/support/synthetic_spec.sh"

run() {  # run async(true|false) round: prints the stall seconds, one per line
  local dir=$tmp/$1-$2
  mkdir -p "$dir"
  synthetic_spec job.name=stall job.run_dir="$dir/run" data.synthetic_samples=256 \
    data.synthetic_image_size=32 data.augment=none model.arch=resnet50 train.max_steps="$steps" \
    train.batch_size=8 train.threads=1 train.log_every_steps=4 train.eval_every_epochs=0 \
    checkpoint.every_steps=4 checkpoint.keep_last=2 checkpoint.async="$1" > "$dir/spec.toml"
  env -u SLURM_JOB_ID "$build/bin/hpctrain-worker" --spec "$dir/spec.toml" > "$dir/out.log" 2>&1
  # The final (synchronous, "finished") checkpoint is not part of the comparison.
  sed -nE "/checkpoint step $steps /d
    s/.*checkpoint step [0-9]+ committed \(([0-9.]+) s, training stalled as long\).*/\1/p
    s/.*checkpoint step [0-9]+: writing in the background \(training stalled ([0-9.]+) s\).*/\1/p" \
    "$dir/out.log" > "$dir/stalls"
  jq -s '[.[] | select(.kind == "train")] | .[1:] | map(8 / .images_per_s) | sort | .[length / 2 | floor]' \
    "$dir/run/metrics.jsonl" > "$dir/step"
  grep -oE 'peak RSS [0-9]+ MiB' "$dir/out.log" | grep -oE '[0-9]+' > "$dir/rss"
}

for ((r = 0; r < rounds; r++)); do run false "$r"; run true "$r"; done
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
sync_stall=$(cat "$tmp"/false-*/stalls | median)
async_stall=$(cat "$tmp"/true-*/stalls | median)
step=$(cat "$tmp"/*/step | median)
echo "## Training stall per checkpoint, $(hostname) ($(nproc) cores), $(date -u +%F)"
echo
echo "ResNet-50, one rank, 1 compute thread, a checkpoint of ~196 MiB (weights + momentum) every 4"
echo "steps, $rounds rounds x $((steps / 4 - 1)) saves per side; median step time ${step} s."
echo
echo "| mode | saves | median stall (s) | peak RSS (MiB, max over rounds) |"
echo "|---|---:|---:|---:|"
echo "| synchronous | $(cat "$tmp"/false-*/stalls | wc -l) | $sync_stall | $(sort -g "$tmp"/false-*/rss | tail -n 1) |"
echo "| asynchronous | $(cat "$tmp"/true-*/stalls | wc -l) | $async_stall | $(sort -g "$tmp"/true-*/rss | tail -n 1) |"
awk -v a="$async_stall" -v s="$sync_stall" 'BEGIN { printf "\nasync stall / sync stall: %.3f (target <= 0.10)\n", a / s }'
