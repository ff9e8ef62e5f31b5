#!/usr/bin/env bash
# Training benchmarks, each side by side with its PyTorch peer in the same run (bench/train/README.md):
#   (a) one rank, synthetic data: hpctrain-worker against an eager PyTorch script
#       (bench/train/peer_train.py synthetic), same model, batch, precision, memory format and
#       compute threads; alternating rounds, best of each side. Our side also runs its data
#       pipeline (one loader thread, transforms); the peer trains on tensors already in memory.
#   (b) end to end, 2 ranks x 1 thread under srun on a local Slurm cluster: CIFAR ResNet-20 on
#       Fashion-MNIST, 3 epochs, batch 128 per rank, SGD 0.1 (Nesterov) with warmup + cosine,
#       pad-2 crop + flip: hpctrain-worker against PyTorch DDP (gloo) with a DataLoader over h5py
#       (one worker process per rank) and the same augmentation; images/s and test top-1.
# Every row reports peak memory per rank (ours vs the peer's) and the thread counts.
# Usage: bench/train/run.sh [BUILD_DIR]  (default: build)
#   ROUNDS=2 (a's rounds)   SKIP_A=1 / SKIP_B=1   EPOCHS=3 (b's epochs)
#   A_ROWS=REGEX (a's rows whose "arch stem size channels batch precision channels_last" line
#   matches, e.g. A_ROWS=fp32; default all)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
worker=$build/bin/hpctrain-worker
hpctrain_data=$build/bin/hpctrain-data
python=$root/.venv/bin/python
peer=$root/bench/train/peer_train.py
tmp=$(mktemp -d /var/tmp/hpctrain-bench-train.XXXXXX)
cluster=$tmp/cluster
cleanup() {
  [[ -f $cluster/slurm.conf ]] && "$root/scripts/slurm-local.sh" stop "$cluster" > /dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$root/tests/support/synthetic_spec.sh"
rounds=${ROUNDS:-2}
epochs=${EPOCHS:-3}

# kv KEY LINE: the value of KEY=VALUE in LINE.
kv() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | head -n 1 | cut -d= -f2; }

# ours_synthetic NAME ARCH STEM SIZE BATCH PRECISION CHANNELS_LAST THREADS STEPS: one
# hpctrain-worker run (one process, no launcher); prints "images_per_s=.. peak_rss_mib=..".
ours_synthetic() {
  local name=$1 arch=$2 stem=$3 size=$4 batch=$5 precision=$6 cl=$7 threads=$8 steps=$9
  local dir=$tmp/$name steps_per_epoch=8
  mkdir -p "$dir"
  local stem_key=()
  [[ $arch == resnet18 || $arch == resnet50 ]] && stem_key=(model.stem="$stem")
  synthetic_spec job.name="$name" job.run_dir="$dir/run" \
    data.synthetic_samples=$((batch * steps_per_epoch)) data.synthetic_image_size="$size" \
    data.augment=crop_flip model.arch="$arch" "${stem_key[@]}" \
    train.epochs=$(((steps + steps_per_epoch - 1) / steps_per_epoch)) train.max_steps="$steps" \
    train.batch_size="$batch" train.precision="$precision" train.channels_last="$cl" \
    train.threads="$threads" train.log_every_steps=3 train.eval_every_epochs=0 \
    checkpoint.every_steps=0 > "$dir/spec.toml"
  rm -rf "$dir/run"
  env -u SLURM_JOB_ID "$worker" --spec "$dir/spec.toml" > "$dir/out.log" 2> "$dir/err.log"
  # Steady state: the windows after the first (which holds start-up and warm-up).
  local ips
  ips=$(jq -s '[.[] | select(.kind == "train")] | .[1:] | map(.images_per_s) | sort | .[length / 2 | floor]' "$dir/run/metrics.jsonl")
  local rss
  rss=$(grep -oE 'peak RSS [0-9]+ MiB' "$dir/out.log" | grep -oE '[0-9]+')
  echo "images_per_s=$ips peak_rss_mib=$rss"
}

if [[ ${SKIP_A:-0} != 1 ]]; then
  echo "## (a) One rank, synthetic data: hpctrain-worker vs PyTorch eager, $(hostname) ($(nproc) cores), $(date -u +%F)"
  echo
  echo "Median images/s of the steady-state windows (ours) vs the timed steps after 3 warm-up steps"
  echo "(PyTorch); best of $rounds alternating rounds each. Ours also runs its loader (1 thread)."
  echo
  echo "| model | input | batch | precision | channels_last | compute threads | hpctrain (img/s) | PyTorch (img/s) | ratio | peak RSS ours / PyTorch (MiB) |"
  echo "|---|---|---:|---|---|---:|---:|---:|---:|---|"
  while read -r arch stem size channels batch precision cl threads steps; do
    [[ -z ${A_ROWS:-} ]] || grep -qE "$A_ROWS" <<<"$arch $stem $size $channels $batch $precision $cl" || continue
    best_ours=0; best_peer=0; rss_ours=0; rss_peer=0
    for ((r = 0; r < rounds; r++)); do
      o=$(ours_synthetic "a-$arch-$precision-$r" "$arch" "$stem" "$size" "$batch" "$precision" "$cl" "$threads" "$steps")
      cl_flag=(); [[ $cl == true ]] && cl_flag=(--channels-last)
      p=$(env -u SLURM_JOB_ID "$python" "$peer" synthetic --arch "$arch" --stem "$stem" --size "$size" \
            --batch "$batch" --precision "$precision" "${cl_flag[@]}" --threads "$threads" \
            --steps "$steps" --samples $((batch * 8)) | tail -n 1)
      best_ours=$(awk -v a="$best_ours" -v b="$(kv images_per_s "$o")" 'BEGIN {print (b > a ? b : a)}')
      best_peer=$(awk -v a="$best_peer" -v b="$(kv images_per_s "$p")" 'BEGIN {print (b > a ? b : a)}')
      rss_ours=$(kv peak_rss_mib "$o"); rss_peer=$(kv peak_rss_mib "$p")
    done
    awk -v a="$arch ($stem stem)" -v s="${size}x${size}x3" -v b="$batch" -v p="$precision" \
        -v c="$cl" -v t="$threads" -v o="$best_ours" -v q="$best_peer" -v ro="$rss_ours" \
        -v rp="$rss_peer" 'BEGIN {
      printf "| %s | %s | %d | %s | %s | %d | %.1f | %.1f | %.2f | %d / %d |\n", a, s, b, p, c, t, o, q, o / q, ro, rp }'
  done <<'CASES'
resnet20 cifar 32 3 128 fp32 true 1 24
resnet20 cifar 32 3 128 fp32 false 1 24
resnet18 cifar 32 3 64 fp32 true 1 15
resnet18 cifar 32 3 64 bf16 true 1 9
resnet50 imagenet 64 3 32 fp32 true 1 12
CASES
  echo
fi

if [[ ${SKIP_B:-0} != 1 ]]; then
  fmnist=/usr/share/datasets/fashion-mnist
  for part in train:train t10k:test; do
    "$hpctrain_data" idx --fashion --quiet --images "$fmnist/${part%%:*}-images-idx3-ubyte.gz" \
      --labels "$fmnist/${part%%:*}-labels-idx1-ubyte.gz" -o "$tmp/${part##*:}.h5" > /dev/null
  done
  HPCTRAIN_SLURM_CPUS=4 "$root/scripts/slurm-local.sh" start "$cluster" > /dev/null
  export SLURM_CONF=$cluster/slurm.conf
  cat > "$tmp/b.toml" <<TOML
[job]
name = "b"
tasks_per_node = 2
run_dir = "$tmp/b"
[data]
train = "$tmp/train.h5"
val = "$tmp/test.h5"
workers = 1
augment = "crop_flip"
crop_padding = 2
[model]
arch = "resnet20"
num_classes = 10
[train]
epochs = $epochs
batch_size = 128
precision = "fp32"
channels_last = true
threads = 1
seed = 1
log_every_steps = 50
eval_every_epochs = 0
[train.optimizer]
lr = 0.1
momentum = 0.9
nesterov = true
weight_decay = 5e-4
[train.schedule]
name = "cosine"
warmup_epochs = 0.5
reference_batch = 256
[checkpoint]
every_steps = 0
TOML
  # peak RSS per rank: each side reports the largest over its ranks.
  timeout 3600 srun --ntasks=2 --cpus-per-task=1 --mpi=pmix --kill-on-bad-exit=1 \
    "$worker" --spec "$tmp/b.toml" > "$tmp/b-ours.log" 2> "$tmp/b-ours.err"
  final=$(grep 'final:' "$tmp/b-ours.log")
  ours_ips=$(grep -oE '[0-9]+ images/s' <<<"$final" | grep -oE '[0-9]+')
  ours_top1=$(grep -oE 'top-1 [0-9.]+%' <<<"$final" | head -n 1 | awk '{print $2}' | tr -d %)
  ours_rss=$(grep -oE 'peak RSS [0-9]+' <<<"$final" | grep -oE '[0-9]+')
  ours_s=$(grep -oE 'in [0-9.]+ s' <<<"$final" | grep -oE '[0-9.]+')
  port=$((20000 + RANDOM % 10000))
  timeout 3600 srun --ntasks=2 --cpus-per-task=1 --mpi=none --kill-on-bad-exit=1 \
    env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$python" "$peer" ddp --arch resnet20 \
    --train "$tmp/train.h5" --test "$tmp/test.h5" --batch 128 --epochs "$epochs" --threads 1 \
    --workers 1 --pad 2 --lr 0.1 --reference-batch 256 --warmup-epochs 0.5 \
    --weight-decay 5e-4 --channels-last > "$tmp/b-peer.log" 2> "$tmp/b-peer.err"
  p=$(grep 'side=pytorch' "$tmp/b-peer.log" | tail -n 1)
  echo "## (b) End to end, 2 ranks x 1 thread under srun, CIFAR ResNet-20 on Fashion-MNIST, $epochs epochs, $(date -u +%F)"
  echo
  echo "Batch 128 per rank, SGD 0.1 at batch 256 (Nesterov, wd 5e-4), warmup 0.5 epoch + cosine,"
  echo "pad-2 crop + flip, channels_last, fp32. Ours: 1 loader thread per rank; PyTorch: DDP (gloo),"
  echo "DataLoader over h5py with 1 worker process per rank. images/s over the training time."
  echo
  echo "| side | train time (s) | images/s | test top-1 | peak RSS per rank (MiB) | threads per rank |"
  echo "|---|---:|---:|---:|---:|---|"
  echo "| hpctrain | $ours_s | $ours_ips | $ours_top1% | $ours_rss | 1 compute + 1 loader |"
  awk -v t="$(kv train_s "$p")" -v i="$(kv images_per_s "$p")" -v a="$(kv top1 "$p")" -v r="$(kv peak_rss_mib "$p")" \
    -v l="$(kv loader_peak_rss_mib "$p")" \
    'BEGIN { printf "| PyTorch DDP | %s | %.0f | %.2f%% | %s + %s (its loader process) | 1 compute + 1 loader process |\n", t, i, 100 * a, r, l }'
  awk -v o="$ours_ips" -v p="$(kv images_per_s "$p")" 'BEGIN { printf "\nspeed ratio (hpctrain / PyTorch images/s): %.2f\n", o / p }'
fi
