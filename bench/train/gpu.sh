#!/usr/bin/env bash
# The GPU training benchmark (run by scripts/gpu-check.sh on a machine with an NVIDIA GPU): one
# rank, ResNet-50 (torchvision's), batch 256, channels_last, fp16 (loss scaling) and bf16.
# hpctrain-worker against PyTorch eager AMP (bench/train/peer_train.py) on the same GPU in the
# same run, on two inputs:
#   synthetic  ours: data.synthetic (random images made on the host, through the loader and the
#              device input path); the peer: random images made once on the GPU (no input path
#              at all: the peer's upper bound)
#   hdf5       the same HDF5 file of random 224x224 images, augment none: ours through its loader;
#              the peer through a DataLoader (pin_memory, the same number of worker processes as
#              our loader threads), non_blocking copies and normalisation on the GPU
# Per run: images/s (the median of the log windows after the first, ours; the timed steps after
# warmup, the peer's), the ratio, GPU utilisation (the mean of nvidia-smi samples every 200 ms
# while the run trains, start-up excluded as far as the samples allow) and the GPU memory in use
# (the peak of the same samples: the whole process, CUDA context included, both sides alike),
# peak host RSS, and the threads each side used.
#   bench/train/gpu.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: gpu.sh BUILD_DIR}" && pwd)
python=${PYTHON:-$(command -v python3)}
tmp=$(mktemp -d)
sampler=
trap '[[ -n $sampler ]] && kill "$sampler" 2>/dev/null; rm -rf "$tmp"' EXIT
source "$root/tests/support/synthetic_spec.sh"
steps=${STEPS:-60}
workers=${WORKERS:-$(( $(nproc) - 2 ))}
threads=${THREADS:-2}

"$build/bin/hpctrain-data" synthetic --samples 5120 --size 224 --classes 1000 --seed 1 -q \
  -o "$tmp/images.h5" > /dev/null

# sample NAME: nvidia-smi samples into $tmp/NAME.smi until stop_sampling.
sample() {
  nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 200 \
    > "$tmp/$1.smi" 2>/dev/null &
  sampler=$!
}
stop_sampling() { kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; sampler=; }
# gpu_figures NAME: "UTIL% MEM_MIB": the mean utilisation over the samples from the first busy
# one on (start-up excluded), the peak memory over all.
gpu_figures() {
  awk -F', *' '{ u[NR] = $1; if ($2 > m) m = $2 }
    END { s = 0; for (i = 1; i <= NR; i++) if (u[i] > 0) { s = i; break }
          n = 0; t = 0; if (s) for (i = s; i <= NR; i++) { t += u[i]; n++ }
          printf "%.0f %.0f", n ? t / n : 0, m }' "$tmp/$1.smi"
}

ours() {  # ours PRECISION SOURCE(synthetic|hdf5): "IMAGES_PER_S PEAK_RSS_MIB THREADS"
  local data name=ours-$1-$2
  if [[ $2 == synthetic ]]; then
    data=(data.synthetic_samples=5120 data.synthetic_image_size=224)
  else
    data=(-data.synthetic data.train="$tmp/images.h5")
  fi
  synthetic_spec job.name="$name" job.gpus_per_node=1 job.run_dir="$tmp/run-$name" "${data[@]}" \
    data.workers="$workers" data.augment=none model.arch=resnet50 model.num_classes=1000 \
    train.max_steps="$steps" train.batch_size=256 train.threads="$threads" train.precision="$1" \
    train.channels_last=true train.log_every_steps=10 train.eval_every_epochs=0 \
    checkpoint.every_steps=0 preemption.enabled=false > "$tmp/$name.toml"
  sample "$name"
  "$build/bin/hpctrain-worker" --spec "$tmp/$name.toml" > "$tmp/$name.log" 2>&1 \
    || { stop_sampling; cat "$tmp/$name.log" >&2; return 1; }
  stop_sampling
  local ips rss
  ips=$(jq -s '[.[] | select(.kind == "train")] | .[1:] | map(.images_per_s) | sort
               | .[length / 2 | floor]' "$tmp/run-$name/metrics.jsonl")
  rss=$(grep -oE 'peak RSS [0-9]+' "$tmp/$name.log" | grep -oE '[0-9]+$')
  echo "$ips $rss"
}

peer() {  # peer PRECISION SOURCE: "IMAGES_PER_S PEAK_RSS_MIB (LOADER_PEAK_RSS_MIB)"
  local name=peer-$1-$2 out
  sample "$name"
  if [[ $2 == synthetic ]]; then
    out=$("$python" "$root/bench/train/peer_train.py" synthetic --arch resnet50 --stem imagenet \
      --classes 1000 --size 224 --batch 256 --precision "$1" --channels-last --device cuda \
      --threads "$threads" --steps "$steps" --warmup 10 --samples 1024 | tail -n 1)
  else
    out=$("$python" "$root/bench/train/peer_train.py" gpu --train "$tmp/images.h5" --arch resnet50 \
      --stem imagenet --classes 1000 --batch 256 --precision "$1" --channels-last \
      --threads "$threads" --workers "$workers" --steps "$steps" --warmup 10 | tail -n 1)
  fi
  stop_sampling
  echo "$out" >&2
  local ips rss loader
  ips=$(grep -oE 'images_per_s=[0-9.]+' <<<"$out" | cut -d= -f2)
  rss=$(grep -oE ' peak_rss_mib=[0-9]+' <<<"$out" | cut -d= -f2)
  loader=$(grep -oE 'loader_peak_rss_mib=[0-9]+' <<<"$out" | cut -d= -f2 || true)
  echo "$ips $rss${loader:+ (+$loader in loader processes)}"
}

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
echo "## GPU: ResNet-50, batch 256, channels_last, $gpu, $(date -u +%F)"
echo
echo "$steps timed steps per run; threads: $threads compute threads per side, $workers loader"
echo "threads (ours) / DataLoader worker processes (peer's hdf5 runs); peer: torch $("$python" -c 'import torch; print(torch.__version__)')"
echo
echo "| precision | data | hpctrain img/s | peer img/s | ratio | GPU util ours / peer | GPU mem MiB ours / peer | host peak RSS MiB ours / peer |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for precision in fp16 bf16; do
  for source in synthetic hdf5; do
    read -r o_ips o_rss <<<"$(ours "$precision" "$source")"
    read -r o_util o_mem <<<"$(gpu_figures "ours-$precision-$source")"
    p_line=$(peer "$precision" "$source")
    p_ips=${p_line%% *}
    p_rss=${p_line#* }
    read -r p_util p_mem <<<"$(gpu_figures "peer-$precision-$source")"
    awk -v p="$precision" -v s="$source" -v o="$o_ips" -v q="$p_ips" \
      -v u="$o_util% / $p_util%" -v m="$o_mem / $p_mem" -v r="$o_rss / $p_rss" \
      'BEGIN { printf "| %s | %s | %.0f | %.0f | %.2f | %s | %s | %s |\n", p, s, o, q, o / q, u, m, r }'
  done
done
