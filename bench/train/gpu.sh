#!/usr/bin/env bash
# The GPU training benchmark (run by scripts/gpu-check.sh on a machine with an NVIDIA GPU): one
# rank, torchvision's ResNet-50, batch 256, channels_last; hpctrain-worker against a PyTorch peer
# on the same GPU in the same run (bench/train/README.md, "GPU"). Rows (ROWS; by default graphs
# then jpeg, what the GPU acceptance measures; the others for a second call):
#   jpeg             fp16, random-resized-crop 224 + flip, on bench/data/jpeg/make_jpegs.py's set
#                    (6,144 images, bench/train/jpeg_data.sh) as format v2 shards: ours through
#                    its loader threads, each count of JPEG_WORKERS (6 4 3 2) from the most down
#                    until it falls 5% below the first (the fewest that keep the GPU busy), and its
#                    rate over ours' eager synthetic figure of this run (a run of its own when no
#                    row before measured it); the peer is torchvision's
#                    ImageNet recipe (peer_jpeg.py: ImageFolder + PIL in a DataLoader with the first
#                    count's workers)
#   fp16-synthetic, bf16-synthetic
#                    ours: data.synthetic (made on the host, through the loader and the device
#                    input path); the peer: random images made once on the GPU (no input path at
#                    all: the peer's upper bound; peer_train.py synthetic)
#   fp16-fused, bf16-fused
#                    ours as fp16-synthetic (bf16-synthetic) with model.fused_bn: batch norm, the
#                    add and ReLU as one op (cuDNN's fused kernels); the peer's figure is that
#                    row's (run it first), the ratio against it
#   fp16-hdf5, bf16-hdf5
#                    one HDF5 file of random 224x224 images, augment none: ours through its
#                    loader; the peer through a pinned DataLoader (peer_train.py gpu)
#   graphs           one table, for each model of GRAPHS_MODELS (ARCH:SIZE:BATCH; resnet20:32:128
#                    resnet50:224:256) and precision of GRAPHS_PRECISIONS (fp16 bf16), synthetic
#                    data: ours with the static step as CUDA graphs and the fused batch norm
#                    (train.cuda_graphs, model.fused_bn), ours eager (the device path as the
#                    synthetic rows run it: for resnet50 at 224 and batch 256 their figure when they
#                    ran first), and the peer on images made once on the GPU, AMP, channels_last,
#                    fused SGD: eager, torch.compile default and mode="reduce-overhead" (CUDA
#                    graphs); the compile warm-up (GRAPHS_WARMUP steps, 20) timed apart, default
#                    first with an empty inductor cache, reduce-overhead after it on that cache.
#                    Kernels a step, once per model (its first precision): ours, the captured
#                    graphs' nodes (kernels, copies, memsets; the all-reduces between them are
#                    not in it); the peer's, the device activities of one profiled step (the
#                    same kinds). graphs-ARCH runs one model's rows. With PEER_CACHE=DIR the
#                    peer compiles on the caches `gpu.sh --prewarm DIR` made ahead (DIR/ARCH-
#                    PRECISION, kept): the warm-up column is then a warm start's, with prewarm's
#                    cold one (DIR/cold.txt) beside it. GRAPHS_VS picks the sides ours with graphs
#                    is measured against (eager none default reduce-overhead: ours eager, then the
#                    peer's modes).
#   compile          (opt-in, not in the default ROWS: an estimated 4-5 minutes on an H200, too
#                    many beside the default rows in a device session; README) one table, for each
#                    model of COMPILE_MODELS (ARCH:SIZE:BATCH; resnet20:32:128 resnet50:224:256
#                    alexnet:224:256): ours as fp16-synthetic runs it, with that model, size and
#                    batch, against the peer on images made once on the GPU, AMP + GradScaler,
#                    channels_last, fused SGD, in each of COMPILE_MODES (none default
#                    reduce-overhead: eager, torch.compile, torch.compile with CUDA graphs), the
#                    warm-up (COMPILE_WARMUP steps, 20: compilation included, each peer with an
#                    empty inductor cache) timed apart. compile-ARCH runs one model's rows.
# images/s, ours: the median of the log windows after the first (10 steps each); the peer's: the
# same windows for jpeg, the timed steps after 10 warm-up steps (compile: COMPILE_WARMUP) for the
# others. Also the ratio, the peak GPU memory in use (nvidia-smi every 200 ms: the whole process,
# CUDA context included, both sides alike), peak host RSS, and for jpeg the windows' images over
# their time ("overall") and the peer's GPU busy share (CUDA events; README says why not
# nvidia-smi's utilisation).
#   bench/train/gpu.sh BUILD_DIR
#   bench/train/gpu.sh --prewarm DIR   the graphs rows' peer, compiled ahead (no build needed):
#                    for each model and precision, side by side, torch.compile default then
#                    reduce-overhead, 3 warm-up steps and one more (CUDA graph trees record on the
#                    second call and replay from the third), into DIR/ARCH-PRECISION (inductor's and
#                    Triton's caches); each one's warm-up seconds (compilation included: default's
#                    on an empty cache) to DIR/cold.txt as "ARCH PRECISION MODE SECONDS".
#                    scripts/gpu-check.sh runs it in the background while it builds and tests.
# STEPS (60), JPEG_STEPS (100), JPEG_WORKERS (6 4 3 2), EVERY (10: steps a window), WORKERS (nproc - 2),
# THREADS (2), JPEG_DIR (jpeg_data.sh's DIR;
# made in a temporary directory when unset), TIMES (a file each part's seconds are appended to),
# ROWS_DONE (a file each row is appended to as "plan ROW" at the start and "done ROW status S"
# once it ended, a graphs or compile row one line a model: what a budget cut left out).
# PRECISION (fp16): the jpeg and compile rows'. STEPS also sets the compile rows' steps (by
# default 300 for resnet20, 60 for the others).
# DEVICE=cpu runs the jpeg, compile and graphs rows without a GPU as a smoke test (ARCH, SIZE,
# BATCH, PRECISION; COMPILE_MODELS and GRAPHS_MODELS with small sizes and batches; ours graphs:
# the static step's eager twin).
# The tables go to stdout, row by row; what the runs print, to stderr.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prewarm=
if [[ ${1:-} == --prewarm ]]; then
  prewarm=$(mkdir -p "${2:?usage: gpu.sh --prewarm DIR}" && cd "$2" && pwd)
else
  build=$(cd "${1:?usage: gpu.sh BUILD_DIR | gpu.sh --prewarm DIR}" && pwd)
fi
peer_cache=${PEER_CACHE:-}
python=${PYTHON:-$(command -v python3)}
tmp=$(mktemp -d)
sampler=
trap '[[ -n $sampler ]] && kill "$sampler" 2>/dev/null; rm -rf "$tmp"' EXIT
source "$root/tests/support/synthetic_spec.sh"
steps=${STEPS:-60}
steps_given=${STEPS:+1}
jpeg_steps=${JPEG_STEPS:-100}
jpeg_workers=${JPEG_WORKERS:-6 4 3 2}
every=${EVERY:-10}
workers=${WORKERS:-$(( $(nproc) - 2 ))}
threads=${THREADS:-2}
rows=${ROWS:-graphs jpeg}
device=${DEVICE:-cuda}
arch=${ARCH:-resnet50}
size=${SIZE:-224}
batch=${BATCH:-256}
jpeg_precision=${PRECISION:-fp16}
times=${TIMES:-/dev/null}
compile_models=${COMPILE_MODELS:-resnet20:32:128 resnet50:224:256 alexnet:224:256}
compile_modes=${COMPILE_MODES:-none default reduce-overhead}
compile_warmup=${COMPILE_WARMUP:-20}
graphs_models=${GRAPHS_MODELS:-resnet20:32:128 resnet50:224:256}
graphs_precisions=${GRAPHS_PRECISIONS:-fp16 bf16}
graphs_warmup=${GRAPHS_WARMUP:-20}
graphs_vs=${GRAPHS_VS:-eager none default reduce-overhead}
for side in $graphs_vs; do
  case $side in
    eager | none | default | reduce-overhead) ;;
    *) echo "gpu.sh: GRAPHS_VS: unknown side '$side' (eager none default reduce-overhead)" >&2
       exit 2 ;;
  esac
done
gpu_keys=(job.gpus_per_node=1)
[[ $device == cpu ]] && gpu_keys=()

took() { echo "bench $1: $(( SECONDS - $2 )) s${3:+ ($3)}" >> "$times"; }

# sample NAME: nvidia-smi's memory.used into $tmp/NAME.smi every 200 ms until stop_sampling.
sample() {
  [[ $device == cpu ]] && { : > "$tmp/$1.smi"; return; }
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 \
    > "$tmp/$1.smi" 2>/dev/null &
  sampler=$!
}
stop_sampling() {
  [[ -n $sampler ]] || return 0
  kill "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; sampler=
}
gpu_mem() { awk '$1 > m { m = $1 } END { printf "%s", NR ? m : "n/a" }' "$tmp/$1.smi"; }

# ours_run NAME KEY=VALUE...: trains with the common keys and these; its log to stderr when it
# fails (the last 60 lines), its peak RSS in $tmp/NAME.rss.
ours_run() {
  local name=$1 t0=$SECONDS
  shift
  synthetic_spec job.name="$name" "${gpu_keys[@]}" job.run_dir="$tmp/run-$name" \
    data.workers="$workers" model.arch="$arch" train.epochs=100000 train.batch_size="$batch" \
    train.threads="$threads" train.channels_last=true train.log_every_steps="$every" \
    train.eval_every_epochs=0 checkpoint.every_steps=0 preemption.enabled=false "$@" \
    > "$tmp/$name.toml"
  sample "$name"
  local status=0
  "$build/bin/hpctrain-worker" --spec "$tmp/$name.toml" > "$tmp/$name.log" 2>&1 || status=$?
  stop_sampling
  took "$name" "$t0" "status $status"
  if (( status != 0 )); then
    echo "--- $name exited $status; its spec and the end of its log:" >&2
    cat "$tmp/$name.toml" >&2
    tail -n 60 "$tmp/$name.log" >&2
    return 1
  fi
  grep -oE 'peak RSS [0-9]+' "$tmp/$name.log" | grep -oE '[0-9]+$' | tail -n 1 > "$tmp/$name.rss"
}
# windows NAME: "MEDIAN OVERALL COUNT" of the log windows after the first (OVERALL: their images
# over their time, the harmonic mean of equal windows).
windows() {
  jq -rs '[.[] | select(.kind == "train") | .images_per_s] | .[1:] | sort
          | if length == 0 then "0 0 0" else
            "\(.[length / 2 | floor]) \(length / (map(1 / .) | add)) \(length)" end' \
    "$tmp/run-$1/metrics.jsonl"
}
# peer_run NAME ARGS...: the peer's last line (key=value pairs); stderr to stderr.
peer_run() {
  local name=$1 t0=$SECONDS status=0 out
  shift
  sample "$name"
  out=$("$python" "$@" | tail -n 1) || status=$?
  stop_sampling
  took "$name" "$t0" "status $status"
  echo "$name: $out" >&2
  (( status == 0 )) && [[ $out == *images_per_s=* ]] || { echo "--- $name exited $status" >&2; return 1; }
  echo "$out"
}
kv() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | head -n 1 | cut -d= -f2; }

# synthetic_reference: ours' eager figure on synthetic data with the jpeg row's model, size, batch
# and precision when a row of this run measured it (the graphs table's "hpctrain eager", the
# synthetic row, or the jpeg row's own run of it); empty otherwise. The jpeg row over it says
# whether its loader kept the GPU busy.
synthetic_reference() {
  local name
  for name in "ours-ge-$arch-$jpeg_precision" "ours-$jpeg_precision-synthetic" \
              "ours-reference-$jpeg_precision"; do
    [[ $name == ours-ge-* && ! " $graphs_models " == *" $arch:$size:$batch "* ]] && continue
    [[ $name == ours-*-synthetic && ($arch != resnet50 || $size != 224 || $batch != 256) ]] \
      && continue
    [[ -f $tmp/run-$name/metrics.jsonl ]] || continue
    windows "$name" | cut -d' ' -f1
    return 0
  done
}

# jpeg_row: the peer (torchvision's recipe) with as many DataLoader workers as the first count of
# JPEG_WORKERS, then ours with each count in turn, from the most down, until its rate falls more
# than 5% below the first's: the fewest loader threads that keep the GPU as busy. A row each.
jpeg_row() {
  local dir=${JPEG_DIR:-$tmp/jpeg} t0=$SECONDS
  if [[ ! -d $dir/v2 ]]; then
    "$root/bench/train/jpeg_data.sh" "$build" "$dir" >&2 || { echo "| jpeg data failed |"; return 1; }
    took "jpeg data" "$t0"
  fi
  local -a counts=($jpeg_workers)
  local top=${counts[0]} w name o_med o_all o_n line p label failed=0 first=1 best=0 fewest=
  local reference peer_cols
  line=$(peer_run peer-jpeg "$root/bench/train/peer_jpeg.py" "$dir/images" --arch "$arch" \
    --size "$size" --batch "$batch" --precision "$jpeg_precision" --channels-last \
    --workers "$top" --threads "$threads" --steps "$jpeg_steps" --log-every "$every" \
    --device "$device") \
    || { line="images_per_s=0 images_per_s_overall=0 windows=0 gpu_busy=n/a peak_rss_mib=n/a"; failed=1; }
  p=$(kv images_per_s "$line")
  reference=$(synthetic_reference)
  if [[ -z $reference ]]; then
    # No row of this run measured it: ours eager on synthetic data, as the graphs table runs it.
    local keys=()
    synthetic_keys "$arch" "$size" "$batch" "$jpeg_precision"
    ours_run "ours-reference-$jpeg_precision" "${keys[@]}" || failed=1
    reference=$(synthetic_reference)
  fi
  label="$jpeg_precision RRC $size, $(find "$dir/images" -name '*.JPEG' | wc -l) JPEGs"
  for w in "${counts[@]}"; do
    name=ours-jpeg-$w
    if ours_run "$name" -data.synthetic data.train="$dir/v2/train-*.h5" \
         data.augment=random_resized_crop data.image_size="$size" model.num_classes=10 \
         train.max_steps="$jpeg_steps" train.precision="$jpeg_precision" data.workers="$w"; then
      read -r o_med o_all o_n <<<"$(windows "$name")"
    else
      o_med=0 o_all=0 o_n=0 failed=1
    fi
    (( o_n >= 3 )) || echo "$name: only $o_n log windows after the first (want >= 3)" >&2
    peer_cols="| | | |"
    if [[ -n $first ]]; then
      best=$o_med
      peer_cols=$(awk -v q="$p" -v qa="$(kv images_per_s_overall "$line")" \
        -v qn="$(kv windows "$line")" -v o="$o_med" -v busy="$(kv gpu_busy "$line")" \
        'BEGIN { printf "| %.0f (%.0f; %d windows) | %s | %s |", q, qa, qn,
                 (q > 0 ? sprintf("%.2f", o / q) : "n/a"), busy }')
    fi
    awk -v label="$label, $w loader threads" -v o="$o_med" -v oa="$o_all" -v on="$o_n" \
      -v peer="$peer_cols" -v ref="$reference" \
      -v m="$(gpu_mem "$name")${first:+ / $(gpu_mem peer-jpeg)}" \
      -v r="$(cat "$tmp/$name.rss" 2>/dev/null || echo n/a)${first:+ / $(kv peak_rss_mib "$line")}" \
      'BEGIN { printf "| %s | %.0f (%.0f; %d windows) %s %s | %s | %s |\n", label, o, oa, on, peer,
               (ref > 0 ? sprintf("%.2f", o / ref) : "n/a"), m, r }'
    first=
    awk -v o="$o_med" -v b="$best" 'BEGIN { exit !(b > 0 && o >= 0.95 * b) }' || break
    fewest=$w
  done
  echo "| fewest loader threads within 5% of $top's rate: ${fewest:-none} | | | | | | | |"
  return "$failed"
}

hdf5_file() {
  [[ -f $tmp/images.h5 ]] && return 0
  local t0=$SECONDS
  "$build/bin/hpctrain-data" synthetic --samples 5120 --size 224 --classes 1000 --seed 1 -q \
    -o "$tmp/images.h5" > /dev/null
  took "hdf5 data" "$t0"
}

row() {  # row PRECISION SOURCE(synthetic|hdf5)
  local precision=$1 source=$2 name=$1-$2 data o_ips=0 o_n=0 rest line p failed=0
  if [[ $source == synthetic ]]; then
    data=(data.synthetic_samples=5120 data.synthetic_image_size=224)
  else
    hdf5_file
    data=(-data.synthetic data.train="$tmp/images.h5")
  fi
  if ours_run "ours-$name" "${data[@]}" data.augment=none model.num_classes=1000 \
       train.max_steps="$steps" train.precision="$precision"; then
    read -r o_ips rest o_n <<<"$(windows "ours-$name")"
  else
    failed=1
  fi
  if [[ $source == synthetic ]]; then
    line=$(peer_run "peer-$name" "$root/bench/train/peer_train.py" synthetic --arch resnet50 \
      --stem imagenet --classes 1000 --size 224 --batch 256 --precision "$precision" \
      --channels-last --device cuda --threads "$threads" --steps "$steps" --warmup 10 \
      --samples 1024) || { line="images_per_s=0"; failed=1; }
  else
    line=$(peer_run "peer-$name" "$root/bench/train/peer_train.py" gpu --train "$tmp/images.h5" \
      --arch resnet50 --stem imagenet --classes 1000 --batch 256 --precision "$precision" \
      --channels-last --threads "$threads" --workers "$workers" --steps "$steps" --warmup 10) \
      || { line="images_per_s=0"; failed=1; }
  fi
  p=$(kv images_per_s "$line")
  echo "$p" > "$tmp/peer-$name.ips"
  local loader
  loader=$(kv loader_peak_rss_mib "$line")
  awk -v p="$precision" -v s="$source" -v o="$o_ips" -v on="$o_n" -v q="$p" \
    -v m="$(gpu_mem "ours-$name") / $(gpu_mem "peer-$name")" \
    -v r="$(cat "$tmp/ours-$name.rss" 2>/dev/null || echo n/a) / $(kv peak_rss_mib "$line")${loader:+ (+$loader loader)}" \
    'BEGIN { printf "| %s | %s | %.0f (%d windows) | %.0f | %s | %s | %s |\n", p, s, o, on, q,
             (q > 0 ? sprintf("%.2f", o / q) : "n/a"), m, r }'
  return "$failed"
}

fused_row() {  # fused_row PRECISION: ours as PRECISION-synthetic with model.fused_bn
  local precision=$1 name=$1-fused o_ips=0 o_n=0 rest p failed=0
  if ours_run "ours-$name" data.synthetic_samples=5120 data.synthetic_image_size=224 \
       data.augment=none model.num_classes=1000 model.fused_bn=true train.max_steps="$steps" \
       train.precision="$precision"; then
    read -r o_ips rest o_n <<<"$(windows "ours-$name")"
  else
    failed=1
  fi
  p=$(cat "$tmp/peer-$precision-synthetic.ips" 2>/dev/null || echo 0)
  awk -v p="$precision" -v o="$o_ips" -v on="$o_n" -v q="$p" \
    -v m="$(gpu_mem "ours-$name") / $(gpu_mem "peer-$precision-synthetic")" \
    -v r="$(cat "$tmp/ours-$name.rss" 2>/dev/null || echo n/a) / (the synthetic row's)" \
    'BEGIN { printf "| %s | synthetic, model.fused_bn | %.0f (%d windows) | %.0f | %s | %s | %s |\n",
             p, o, on, q, (q > 0 ? sprintf("%.2f", o / q) : "n/a"), m, r }'
  return "$failed"
}

# compile_row ARCH SIZE BATCH: ours, then the peer in each of compile_modes; a table row each.
compile_row() {
  local arch=$1 size=$2 batch=$3 classes=1000 stem=imagenet n=60 samples=5120 failed=0
  local o_ips=0 o_n=0 rest mode name line p label side
  [[ $arch == resnet20 ]] && classes=10 stem=cifar n=300  # the CIFAR ResNets' own stem
  [[ -n $steps_given ]] && n=$steps
  [[ $device == cpu ]] && samples=$(( batch * 8 ))
  label="$arch ($stem stem) ${size}x$size, batch $batch, $n steps"
  [[ $arch == alexnet ]] && label="$arch ${size}x$size, batch $batch, $n steps"  # no stem choice
  if ours_run "ours-c-$arch" data.synthetic_samples="$samples" data.synthetic_image_size="$size" \
       data.augment=none model.arch="$arch" model.num_classes="$classes" \
       train.batch_size="$batch" train.max_steps="$n" train.precision="$jpeg_precision"; then
    read -r o_ips rest o_n <<<"$(windows "ours-c-$arch")"
  else
    failed=1
  fi
  awk -v l="$label" -v o="$o_ips" -v on="$o_n" -v m="$(gpu_mem "ours-c-$arch")" \
    -v r="$(cat "$tmp/ours-c-$arch.rss" 2>/dev/null || echo n/a)" \
    'BEGIN { printf "| %s | hpctrain (%d windows) | %.0f | | | %s | | %s |\n", l, on, o, m, r }'
  for mode in $compile_modes; do
    name=peer-c-$arch-$mode
    # An empty inductor cache for each: compile_s is what a first run costs, and no mode reuses
    # the kernels another one compiled.
    line=$(TORCHINDUCTOR_CACHE_DIR=$tmp/inductor-$name TRITON_CACHE_DIR=$tmp/inductor-$name/triton \
      peer_run "$name" "$root/bench/train/peer_train.py" synthetic --arch "$arch" --stem "$stem" \
      --classes "$classes" --size "$size" --batch "$batch" --precision "$jpeg_precision" \
      --channels-last --device "$device" --threads "$threads" --steps "$n" \
      --warmup "$compile_warmup" --samples "$(( batch * 4 ))" --compile "$mode") \
      || { line="images_per_s=0"; failed=1; }
    rm -rf "$tmp/inductor-$name"
    p=$(kv images_per_s "$line")
    case $mode in none) side=eager ;; *) side="compile $mode" ;; esac
    # More than one graph: graph breaks or recompiles; CUDA graph skips: part of the step ran
    # without graphs (bench.log has the reasons).
    side+=$(awk -v g="$(kv graphs "$line")" -v k="$(kv cudagraph_skips "$line")" \
      'BEGIN { if (g > 1) printf " (graphs: %d)", g; if (k > 0) printf " (CUDA graph skips: %d)", k }')
    awk -v l="$label" -v s="$side" -v o="$o_ips" -v q="$p" -v w="$(kv compile_s "$line")" \
      -v m="$(gpu_mem "$name")" -v a="$(kv gpu_peak_allocated_mib "$line")" \
      -v r="$(kv peak_rss_mib "$line")" \
      'BEGIN { printf "| %s | %s | %.0f | %s | %s | %s | %s | %s |\n", l, s, q,
               (q > 0 ? sprintf("%.2f", o / q) : "n/a"), (w == "" ? "n/a" : w), m,
               (a == "" ? "n/a" : a), (r == "" ? "n/a" : r) }'
  done
  return "$failed"
}

# graphs_peer_args ARCH SIZE BATCH PRECISION MODE STEPS WARMUP: peer_train.py and its arguments
# for a graphs row's peer (the CIFAR ResNets with their own stem and 10 classes), in the array
# peer_args.
graphs_peer_args() {
  local arch=$1 classes=1000 stem=imagenet
  [[ $arch == resnet20 ]] && classes=10 stem=cifar
  peer_args=("$root/bench/train/peer_train.py" synthetic --arch "$arch" --stem "$stem"
             --classes "$classes" --size "$2" --batch "$3" --precision "$4" --channels-last
             --device "$device" --threads "$threads" --steps "$6" --warmup "$7"
             --samples "$(( $3 * 4 ))" --compile "$5")
}

# prewarm_chain ARCH SIZE BATCH PRECISION: default, then reduce-overhead on its cache.
prewarm_chain() {
  local arch=$1 precision=$4 mode line t0 cache=$prewarm/$1-$4
  for mode in default reduce-overhead; do
    graphs_peer_args "$arch" "$2" "$3" "$precision" "$mode" 1 3
    t0=$SECONDS
    if line=$(TORCHINDUCTOR_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache/triton \
              "$python" "${peer_args[@]}" 2> "$cache.$mode.log" | tail -n 1) \
       && [[ $line == *compile_s=* ]]; then
      echo "$arch $precision $mode $(kv compile_s "$line")" >> "$prewarm/cold.txt"
      echo "prewarm $arch $precision $mode: $((SECONDS - t0)) s; $line" >&2
    else
      echo "prewarm $arch $precision $mode: FAILED after $((SECONDS - t0)) s; its stderr's end:" >&2
      tail -n 20 "$cache.$mode.log" >&2
      return 1
    fi
  done
}

# prewarm_peers: gpu.sh --prewarm DIR (the header says what): a chain for each model and
# precision, side by side (dynamo and AOTAutograd are one Python thread each; the cores are many).
prewarm_peers() {
  local spec arch size batch precision status=0 pid
  local -a chains=()
  rm -f "$prewarm/cold.txt"
  for spec in $graphs_models; do
    IFS=: read -r arch size batch <<<"$spec"
    for precision in $graphs_precisions; do
      mkdir -p "$prewarm/$arch-$precision"
      prewarm_chain "$arch" "$size" "$batch" "$precision" &
      chains+=($!)
    done
  done
  for pid in "${chains[@]}"; do wait "$pid" || status=1; done
  return "$status"
}

# graphs_steps ARCH: a graphs row's steps (STEPS; else 300 for the CIFAR ResNets, 60 others).
graphs_steps() {
  if [[ -n $steps_given ]]; then echo "$steps"; elif [[ $1 == resnet20 ]]; then echo 300
  else echo 60; fi
}

# synthetic_keys ARCH SIZE BATCH PRECISION: the spec keys of ours on synthetic data for the graphs
# rows (the CIFAR ResNets: 10 classes; the others 1000; graphs_steps), in the caller's array keys.
synthetic_keys() {
  local classes=1000 n samples=5120
  [[ $1 == resnet20 ]] && classes=10
  n=$(graphs_steps "$1")
  [[ $device == cpu ]] && samples=$(( $3 * 8 ))
  keys=(data.synthetic_samples="$samples" data.synthetic_image_size="$2" data.augment=none
        model.arch="$1" model.num_classes="$classes" train.batch_size="$3"
        train.max_steps="$n" train.precision="$4")
}

# graphs_eager_row ARCH SIZE BATCH PRECISION GRAPHS_RATE KEY=VALUE...: ours eager, the graphs
# table's row: the synthetic row's run when that ran first and is this very run (resnet50, 224,
# batch 256), a run of its own otherwise.
graphs_eager_row() {
  local arch=$1 size=$2 batch=$3 precision=$4 o_g=$5 name=ours-$4-synthetic o_e rest on failed=0
  shift 5
  if [[ ! -f $tmp/$name.rss || $arch != resnet50 || $size != 224 || $batch != 256 ]]; then
    name=ours-ge-$arch-$precision
    ours_run "$name" "$@" || failed=1
  fi
  read -r o_e rest on <<<"$(windows "$name" 2>/dev/null || echo "0 0 0")"
  awk -v l="$arch ${size}x$size b$batch" -v p="$precision" -v o="$o_e" -v on="$on" -v g="$o_g" \
    -v m="$(gpu_mem "$name")" -v r="$(cat "$tmp/$name.rss" 2>/dev/null || echo n/a)" \
    'BEGIN { printf "| %s | %s | hpctrain eager (%d windows) | %.0f | %s | | | %s | %s |\n",
             l, p, on, o, (o > 0 ? sprintf("%.2f", g / o) : "n/a"), m, r }'
  return "$failed"
}

# graphs_row ARCH SIZE BATCH: for each precision, ours with graphs and the fused batch norm, then
# the sides of GRAPHS_VS; a table row each.
graphs_row() {
  local arch=$1 size=$2 batch=$3 failed=0 keys=() n
  local precision label o_g=0 on rest nodes mode name line p side kernels first=1 cache
  local cold
  n=$(graphs_steps "$arch")
  # ours: the static step's eager twin on a CPU (the smoke test)
  [[ $device == cpu ]] && local -x HPCTRAIN_GPU_PATH_ON_CPU=1
  for precision in $graphs_precisions; do
    label="$arch ${size}x$size b$batch"
    synthetic_keys "$arch" "$size" "$batch" "$precision"
    name=ours-g-$arch-$precision
    if ours_run "$name" "${keys[@]}" train.cuda_graphs=true model.fused_bn=true; then
      read -r o_g rest on <<<"$(windows "$name")"
      nodes=$(grep -ohE '[0-9]+ graph nodes a step' "$tmp/$name.log" | head -n 1 | cut -d' ' -f1)
      grep -q "static step: " "$tmp/$name.log" || { echo "$name: no static step" >&2; failed=1; }
    else
      o_g=0 on=0 nodes= failed=1
    fi
    [[ $first == 1 ]] || nodes=
    awk -v l="$label" -v p="$precision" -v o="$o_g" -v on="$on" -v k="${nodes:-}" \
      -v m="$(gpu_mem "$name")" -v r="$(cat "$tmp/$name.rss" 2>/dev/null || echo n/a)" \
      'BEGIN { printf "| %s | %s | hpctrain, CUDA graphs + fused BN (%d windows) | %.0f | | %s | | %s | %s |\n",
               l, p, on, o, k, m, r }'
    if [[ " $graphs_vs " == *" eager "* ]]; then
      graphs_eager_row "$arch" "$size" "$batch" "$precision" "$o_g" "${keys[@]}" || failed=1
    fi
    cache=$tmp/inductor-$arch-$precision
    [[ -n $peer_cache ]] && cache=$peer_cache/$arch-$precision
    for mode in $graphs_vs; do
      [[ $mode == eager ]] && continue
      name=peer-g-$arch-$precision-$mode
      graphs_peer_args "$arch" "$size" "$batch" "$precision" "$mode" "$n" "$graphs_warmup"
      line=$(TORCHINDUCTOR_CACHE_DIR=$cache TRITON_CACHE_DIR=$cache/triton \
        peer_run "$name" "${peer_args[@]}" ${first:+--count-kernels}) \
        || { line="images_per_s=0"; failed=1; }
      cold=
      [[ -n $peer_cache ]] && cold=$(awk -v a="$arch" -v p="$precision" -v m="$mode" \
        '$1 == a && $2 == p && $3 == m { c = $4 } END { print c }' "$peer_cache/cold.txt" 2>/dev/null)
      p=$(kv images_per_s "$line")
      kernels=$(kv kernels_per_step "$line")
      case $mode in none) side="PyTorch eager" ;; *) side="torch.compile $mode" ;; esac
      side+=$(awk -v g="$(kv graphs "$line")" -v k="$(kv cudagraph_skips "$line")" \
        'BEGIN { if (g > 1) printf " (graphs: %d)", g; if (k > 0) printf " (CUDA graph skips: %d)", k }')
      awk -v l="$label" -v pr="$precision" -v s="$side" -v g="$o_g" -v q="$p" -v k="${kernels:-}" \
        -v w="$(kv compile_s "$line")" -v c="$cold" -v m="$(gpu_mem "$name")" \
        -v r="$(kv peak_rss_mib "$line")" \
        'BEGIN { if (w == "0.0") w = ""; if (c != "") w = w " (cold " c ")"
                 printf "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s |\n", l, pr, s, q,
                 (q > 0 ? sprintf("%.2f", g / q) : "n/a"), k, w, m, (r == "" ? "n/a" : r) }'
    done
    [[ -n $peer_cache ]] || rm -rf "$cache"
    first=
  done
  return "$failed"
}

# model_rows KIND ROW FN MODELS: FN ARCH SIZE BATCH for each model of MODELS (ARCH:SIZE:BATCH ...)
# that ROW (KIND, or KIND-ARCH) names.
model_rows() {
  local kind=$1 r=$2 fn=$3 spec m_arch m_size m_batch found= failed=0
  for spec in $4; do
    IFS=: read -r m_arch m_size m_batch <<<"$spec"
    [[ $r == "$kind" || $r == "$kind-$m_arch" ]] || continue
    found=1
    if "$fn" "$m_arch" "$m_size" "$m_batch"; then
      finished "$kind-$m_arch" 0
    else
      failed=1
      finished "$kind-$m_arch" 1
    fi
  done
  if [[ -z $found ]]; then
    echo "gpu.sh: no model for row $r (${kind^^}_MODELS)" >&2
    finished "$r" 1
    return 1
  fi
  return "$failed"
}

# table NAME: prints NAME's header when the rows before were another table's.
table=
table() {
  [[ $table == "$1" ]] && return 0
  table=$1
  echo
  case $1 in
    jpeg)
      echo "$jpeg_steps steps, $every a window; images/s: median of the windows after the first (overall)"
      echo
      echo "Ours with each count of loader threads of JPEG_WORKERS ($jpeg_workers), from the most down until"
      echo "it falls more than 5% below the first; the recipe with the first count's DataLoader workers."
      echo "\"of synthetic\": ours over its own eager figure on synthetic data (same model, size, batch"
      echo "and precision, measured in this run): 1.0 is a loader that keeps the GPU busy."
      echo
      echo "| run | hpctrain img/s | torchvision recipe img/s | ratio | peer GPU busy | of synthetic | GPU mem MiB ours / peer | host peak RSS MiB ours / peer |"
      echo "|---|---:|---:|---:|---:|---:|---:|---:|"
      ;;
    rows)
      echo "$steps steps; images/s ours: median of the windows after the first; peer: after 10 warm-up steps"
      echo
      echo "| precision | data | hpctrain img/s | peer img/s | ratio | GPU mem MiB ours / peer | host peak RSS MiB ours / peer |"
      echo "|---|---|---:|---:|---:|---:|---:|"
      ;;
    graphs)
      echo "CUDA graphs: synthetic data (ours: made on the host, through the loader; the peer's: made"
      echo "once on the GPU), channels_last, fused SGD. images/s ours: median of the $every-step windows"
      echo "after the first (warm-up and capture are in the first); the peer: the timed steps after"
      echo "$graphs_warmup warm-up steps (their wall time, compilation and CUDA graph recording"
      if [[ -n $peer_cache ]]; then
        echo "included, is the warm-up column: on inductor caches made ahead by gpu.sh --prewarm, a"
        echo "warm start's; in brackets the prewarm's 3 warm-up steps, compilation included, on an"
        echo "empty cache for default and on default's for reduce-overhead, the four model/precision"
        echo "chains side by side while the build and the tests ran)."
      else
        echo "included, is the warm-up column; reduce-overhead's on the inductor cache default left)."
      fi
      echo "\"graphs / side\": ours with CUDA graphs and the fused batch norm over that side. Kernels a"
      echo "step: ours, the captured graphs' nodes; the peer's, one profiled step's device activities."
      echo
      echo "| model | precision | side | img/s | graphs / side | kernels a step | warm-up s | GPU mem MiB | host peak RSS MiB |"
      echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
      ;;
    compile)
      echo "torch.compile: $jpeg_precision, channels_last, synthetic data (ours: made on the host, through"
      echo "the loader; the peers': made once on the GPU), fused SGD (ours on GPU). images/s ours: median"
      echo "of the $every-step windows after the first; peers: the timed steps after $compile_warmup warm-up steps,"
      echo "whose wall time (compilation and CUDA graph recording included, an empty inductor cache) is"
      echo "the warm-up column. GPU mem: nvidia-smi's peak (the process); peer allocated: torch's peak."
      echo "A side that counts graphs had graph breaks or recompiles; one with CUDA graph skips ran"
      echo "part of its step outside graphs (bench.log says why)."
      echo
      echo "| model | side | img/s | ours / side | warm-up s | GPU mem MiB | peer allocated MiB | host peak RSS MiB |"
      echo "|---|---|---:|---:|---:|---:|---:|---:|"
      ;;
  esac
}

if [[ -n $prewarm ]]; then
  prewarm_peers
  exit
fi
if [[ $device == cpu ]]; then
  gpu="no GPU (DEVICE=cpu smoke test)"
else
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n 1)
fi
echo "## GPU: $arch, batch $batch, channels_last, $gpu, $(date -u +%F)"
echo
echo "threads: $threads compute threads per side, $workers loader threads (ours) / DataLoader worker"
echo "processes (the peer's hdf5 runs; the jpeg row's: JPEG_WORKERS, $jpeg_workers); peer: torch $("$python" -c 'import torch; print(torch.__version__)')"
status=0
# Each row (a graphs or compile row, one line a model) as planned, then as finished, to ROWS_DONE:
# a later call can tell what a budget cut left out (scripts/gpu-check.sh bench).
row_units() {
  local r spec
  for r in $rows; do
    case $r in
      graphs | compile)
        local models=$graphs_models
        [[ $r == compile ]] && models=$compile_models
        for spec in $models; do echo "$r-${spec%%:*}"; done
        ;;
      *) echo "$r" ;;
    esac
  done
}
rows_done=${ROWS_DONE:-/dev/null}
row_units | sed 's/^/plan /' >> "$rows_done"
finished() { echo "done $1 status $2" >> "$rows_done"; }
for r in $rows; do
  row_status=0
  case $r in
    jpeg)
      table jpeg
      jpeg_row || row_status=1
      finished jpeg "$row_status"
      ;;
    fp16-* | bf16-*)
      table rows
      if [[ $r == *-fused ]]; then
        fused_row "${r%%-*}" || row_status=1
      else
        row "${r%%-*}" "${r#*-}" || row_status=1
      fi
      finished "$r" "$row_status"
      ;;
    graphs | graphs-*)
      table graphs
      model_rows graphs "$r" graphs_row "$graphs_models" || row_status=1
      ;;
    compile | compile-*)
      table compile
      model_rows compile "$r" compile_row "$compile_models" || row_status=1
      ;;
    *) echo "gpu.sh: unknown row $r" >&2; row_status=1; finished "$r" 1 ;;
  esac
  (( row_status == 0 )) || status=1
done
exit "$status"
