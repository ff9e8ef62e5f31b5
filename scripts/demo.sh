#!/usr/bin/env bash
# The main job, end to end on a local Slurm cluster: install what is missing, build, convert
# Fashion-MNIST from Debian's dataset-fashion-mnist into the HDF5 layout (data/fashion-mnist/),
# start a one-node cluster, submit configs/fashion-mnist.toml (CIFAR ResNet-20, 2 CPU ranks,
# 3 epochs) with `hpctrain submit`, follow it with `hpctrain status`, and print the final test
# top-1 and the run directory.
#
# Then the preemption protocol on the same cluster: a job whose ranks run
# tests/slurm/payload.sh (in place of the worker) asks for one requeue: exit 75,
# `scontrol requeue`, a second attempt with SLURM_RESTART_COUNT=1, both in one log and the ledger.
#   HPCTRAIN_BUILD_DIR  build directory (default: build)
#   DEMO_SKIP_REQUEUE=1 only the training job
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${HPCTRAIN_BUILD_DIR:-build}
cluster=/var/tmp/hpctrain-demo-cluster
runs=/var/tmp/hpctrain-demo-runs

scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target hpctrain hpctrain-worker hpctrain-data
hpctrain=$build/bin/hpctrain

fmnist=/usr/share/datasets/fashion-mnist
echo "==> converting Fashion-MNIST ($fmnist) into data/fashion-mnist/"
mkdir -p data/fashion-mnist
for part in train:train t10k:test; do
  "$build/bin/hpctrain-data" idx --fashion --quiet --images "$fmnist/${part%%:*}-images-idx3-ubyte.gz" \
    --labels "$fmnist/${part%%:*}-labels-idx1-ubyte.gz" -o "data/fashion-mnist/${part##*:}.h5"
done

echo "==> starting a one-node Slurm cluster in $cluster"
scripts/slurm-local.sh restart "$cluster" >/dev/null
trap 'scripts/slurm-local.sh stop "$cluster"' EXIT
export SLURM_CONF=$cluster/slurm.conf
sinfo

# follow RUN_DIR SECONDS: prints each new Slurm state until the job ends; the last one in $state.
follow() {
  local run=$1 deadline=$((SECONDS + $2)) last=
  while (( SECONDS < deadline )); do
    state=$("$hpctrain" status --json "$run" | jq -r '.slurm[0].state // "UNKNOWN"')
    [[ $state != "$last" ]] && echo "    $(date +%T) $state"
    last=$state
    case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) return ;; esac
    sleep 2
  done
}

overrides=(--profile local --set "job.run_dir=$runs/{name}")
run=$runs/fashion-mnist-r20
rm -rf "$run"
"$hpctrain" check "${overrides[@]}" configs/fashion-mnist.toml
id=$("$hpctrain" submit "${overrides[@]}" configs/fashion-mnist.toml)
echo "==> job $id submitted: CIFAR ResNet-20 on Fashion-MNIST, 2 ranks; progress in $run/logs/slurm-$id.out"
started=$SECONDS
follow "$run" 1800
echo "==> hpctrain status $run"
"$hpctrain" status "$run"
echo "==> the job's log"
grep -E 'training |epoch [0-9]+/[0-9]+ step [0-9]*[05]0/|eval |final:' "$run/logs/slurm-$id.out" || true
[[ $state == COMPLETED ]] || { echo "the training job ended $state" >&2; exit 1; }
echo
echo "==> $(grep -o 'final: test top-1 [0-9.]*%' "$run/logs/slurm-$id.out" | sed 's/final: //') after $((SECONDS - started)) s in Slurm; run directory $run"

[[ ${DEMO_SKIP_REQUEUE:-0} == 1 ]] && exit 0
echo
echo "==> the requeue protocol: ranks run tests/slurm/payload.sh, which asks for one requeue"
requeue_overrides=(--profile local --set "job.run_dir=$runs/{name}"
                   --set "job.worker=$root/tests/slurm/payload.sh"
                   --set job.env.PAYLOAD_MODE=requeue-once)
rm -rf "$runs/smoke-cpu"
id=$("$hpctrain" submit "${requeue_overrides[@]}" configs/smoke-cpu.toml)
echo "==> job $id submitted; following it (a requeue takes about 30 s here)"
follow "$runs/smoke-cpu" 600
"$hpctrain" status "$runs/smoke-cpu"
echo "==> log ($runs/smoke-cpu/logs/slurm-$id.out)"
cat "$runs/smoke-cpu/logs/slurm-$id.out"
echo "==> attempts ledger ($runs/smoke-cpu/attempts.jsonl)"
cat "$runs/smoke-cpu/attempts.jsonl"
[[ $state == COMPLETED ]]
