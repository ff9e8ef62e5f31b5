#!/usr/bin/env bash
# Local SGD against the all-reduce on a throttled link (bench/train/README.md, "Local SGD"):
# 2 ranks on 2 namespace nodes of scripts/slurm-multinode.sh, one per node, under srun, every
# byte between them through a tbf queue on the host side of each node's veth (RATES, e.g. 1gbit
# and 100mbit: the node's incoming link). CIFAR ResNet-20 on Fashion-MNIST, the recipe of
# run.sh's (b): 3 epochs, batch 128 per rank, SGD 0.1 at batch 256 (Nesterov, wd 5e-4), 0.5 epoch
# of warm-up then cosine, pad-2 crop + flip, channels_last, fp32. Each row: train.sync =
# "allreduce", or "local_sgd" with sync_every_steps H (outer optimizer none); training time (the
# worker's, evaluation apart), the wall time of the srun step, test top-1, bytes the nodes sent
# (the host-side veths' rx counters, both nodes, divided by 2: per rank), peak RSS per rank.
# The kernel here has no sch_netem, so no delay is added: only the rate is throttled.
# Usage: bench/train/local_sgd.sh [BUILD_DIR]   (needs root; about 4 minutes a row here)
#   RATES="1gbit 100mbit"   HS="4 16"   EPOCHS=3   OUTER=none   WARMUP_STEPS=0
#   CONFIGS="allreduce 4 16" (the rows of each rate: allreduce, or H; default allreduce, then HS)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
worker=$build/bin/hpctrain-worker
hpctrain_data=$build/bin/hpctrain-data
tmp=$(mktemp -d /var/tmp/hpctrain-bench-lsgd.XXXXXX)
cluster=$tmp/cluster
cleanup() {
  [[ -f $cluster/slurm.conf ]] && "$root/scripts/slurm-multinode.sh" stop "$cluster" > /dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
rates=${RATES:-1gbit 100mbit}
hs=${HS:-4 16}
epochs=${EPOCHS:-3}
outer=${OUTER:-none}
warmup=${WARMUP_STEPS:-0}

fmnist=/usr/share/datasets/fashion-mnist
for part in train:train t10k:test; do
  "$hpctrain_data" idx --fashion --quiet --images "$fmnist/${part%%:*}-images-idx3-ubyte.gz" \
    --labels "$fmnist/${part%%:*}-labels-idx1-ubyte.gz" -o "$tmp/${part##*:}.h5" > /dev/null
done
HPCTRAIN_SLURM_CPUS=2 "$root/scripts/slurm-multinode.sh" start "$cluster" 2 > /dev/null
export SLURM_CONF=$cluster/slurm.conf
tag=hmn$(printf '%s' "$cluster" | md5sum | cut -c1-6)  # as slurm-multinode.sh names its links
links=("${tag}v1" "${tag}v2")

spec() {  # spec NAME SYNC [H]
  cat <<TOML
[job]
name = "$1"
nodes = 2
tasks_per_node = 1
run_dir = "$tmp/$1"
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
sync = "$2"
TOML
  if [[ $2 == local_sgd ]]; then
    printf 'sync_every_steps = %s\nsync_warmup_steps = %s\nouter_optimizer = "%s"\n' "$3" "$warmup" "$outer"
  fi
  cat <<TOML
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
}

sent_bytes() {  # what both nodes sent so far: rx on the host side of their veths
  local total=0 l
  for l in "${links[@]}"; do total=$((total + $(cat "/sys/class/net/$l/statistics/rx_bytes"))); done
  echo "$total"
}

echo "## Local SGD against the all-reduce, 2 ranks on 2 namespace nodes, $(date -u +%F)"
echo
echo "CIFAR ResNet-20 on Fashion-MNIST, $epochs epochs, batch 128 per rank, 1 compute + 1 loader"
echo "thread per rank; local_sgd: outer optimizer $outer, $warmup warm-up steps of all-reduce."
echo
echo "| link (tbf) | sync | H | train time (s) | srun wall (s) | images/s | test top-1 | MiB sent per rank | averagings | peak RSS per rank (MiB) |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for rate in $rates; do
  for l in "${links[@]}"; do
    tc qdisc replace dev "$l" root tbf rate "$rate" burst 256kb latency 100ms
  done
  for config in ${CONFIGS:-allreduce $hs}; do
    if [[ $config == allreduce ]]; then
      name=$rate-allreduce sync=allreduce h=-
      spec "$name" allreduce > "$tmp/$name.toml"
    else
      name=$rate-h$config sync=local_sgd h=$config
      spec "$name" local_sgd "$config" > "$tmp/$name.toml"
    fi
    before=$(sent_bytes)
    t0=$(date +%s.%N)
    timeout 3600 srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=2 --mpi=pmix \
      --kill-on-bad-exit=1 "$worker" --spec "$tmp/$name.toml" > "$tmp/$name.log" 2> "$tmp/$name.err" \
      || { echo "$name failed:" >&2; tail -n 20 "$tmp/$name.log" "$tmp/$name.err" >&2; exit 1; }
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    after=$(sent_bytes)
    final=$(grep 'final:' "$tmp/$name.log")
    train_s=$(grep -oE 'in [0-9.]+ s' <<<"$final" | grep -oE '[0-9.]+')
    ips=$(grep -oE '[0-9]+ images/s' <<<"$final" | grep -oE '[0-9]+')
    top1=$(grep -oE 'top-1 [0-9.]+%' <<<"$final" | awk '{print $2}')
    rss=$(grep -oE 'peak RSS [0-9]+' <<<"$final" | grep -oE '[0-9]+')
    averagings=$(grep -oE 'local SGD: [0-9]+ averagings' <<<"$final" | grep -oE '[0-9]+' || echo -)
    mib=$(awk -v b=$((after - before)) 'BEGIN { printf "%.1f", b / 2 / 1048576 }')
    echo "| $rate | $sync | $h | $train_s | $wall | $ips | $top1 | $mib | $averagings | $rss |"
  done
done
