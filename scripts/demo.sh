#!/usr/bin/env bash
# The main job, end to end on a local Slurm cluster: install what is missing, build, convert
# Fashion-MNIST from Debian's dataset-fashion-mnist into the HDF5 layout (data/fashion-mnist/),
# start a one-node cluster, submit configs/fashion-mnist.toml (CIFAR ResNet-20, 2 CPU ranks,
# 3 epochs) with `hpctrain submit`, follow it with `hpctrain status`, and print the final test
# top-1 and the run directory.
#
# While it trains, the job is preempted twice, as a cluster would (docs/preemption.md): once the
# checkpoint at step 200 is committed, `scancel --signal=USR2` (the ranks agree on a step,
# checkpoint it and exit 75; the step supervisor requeues the job); once the resumed attempt has
# committed step 400, `scontrol requeue` (Slurm sends the ranks SIGTERM, SIGKILL after its
# KillWait; they checkpoint in between if they can, and the next attempt resumes from the last
# committed checkpoint either way). No step from the user in between: each attempt resumes where a
# committed checkpoint is and the run finishes with the weights an uninterrupted run has: the
# fingerprint printed at the end equals that of a run with DEMO_NO_PREEMPT=1
# (tests/slurm/preempt.sh compares them bitwise). The log keeps every attempt; the attempts
# ledger and `hpctrain status` record them.
#   HPCTRAIN_BUILD_DIR  build directory (default: build)
#   DEMO_NO_PREEMPT=1   train without the two preemptions
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

# until SECONDS WHAT COMMAND...: runs COMMAND every 2 s until it succeeds; fails after SECONDS.
until_ok() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" 2>/dev/null; do
    (( SECONDS < deadline )) || { echo "demo: no $what after $1 s; see $run/logs/" >&2; exit 1; }
    sleep 2
  done
}
committed_at_least() {  # a checkpoint at step >= $1 is committed
  local step
  step=$("$hpctrain" status --json "$run" | jq -r '.last_checkpoint_step // -1')
  (( step >= $1 ))
}
in_log() { grep -q "$1" "$run/logs/slurm-$id.out"; }

if [[ ${DEMO_NO_PREEMPT:-0} != 1 ]]; then
  until_ok 900 "checkpoint at step 200" committed_at_least 200
  echo "==> $(date +%T) step 200 is committed: scancel --signal=USR2 $id (a preemption notice)"
  scancel --signal=USR2 "$id"
  until_ok 300 "second attempt" in_log 'attempt 2 on'
  until_ok 300 "resume" in_log 'resuming from checkpoint step'
  echo "    $(grep -ohE 'stopping at step [0-9]+.*|checkpoint step [0-9]+ committed|resuming from checkpoint step [0-9]+' \
    "$run/logs/slurm-$id.out" | tail -n 3 | paste -sd';' | sed 's/;/; /g')"
  until_ok 900 "checkpoint at step 400" committed_at_least 400
  echo "==> $(date +%T) step 400 is committed: scontrol requeue $id (SIGTERM to the ranks)"
  scontrol requeue "$id"
  until_ok 300 "third attempt" in_log 'attempt 3 on'
fi

follow "$run" 1800
echo "==> hpctrain status $run"
"$hpctrain" status "$run"
echo "==> the job's log ($run/logs/slurm-$id.out)"
grep -E '^hpctrain: job|training |epoch [0-9]+/[0-9]+ step [0-9]*[05]0/|eval |final:|stopping|resuming|committed' \
  "$run/logs/slurm-$id.out" || true
echo "==> attempts ledger ($run/attempts.jsonl)"
cat "$run/attempts.jsonl"
[[ $state == COMPLETED ]] || { echo "the training job ended $state" >&2; exit 1; }
echo
echo "==> $(grep -o 'final: test top-1 [0-9.]*%' "$run/logs/slurm-$id.out" | sed 's/final: //') after $((SECONDS - started)) s in Slurm; run directory $run"
# Every rank prints a fingerprint of its final weights: a run with DEMO_NO_PREEMPT=1 prints the same.
echo "==> final weights: $(grep -ohE 'fnv1a64 0x[0-9a-f]+' "$run/logs/slurm-$id.err" | sort -u | paste -sd' ')"
"$hpctrain" report "$run" >/dev/null
echo "==> hpctrain report: $run/report.html (curves, attempts, checkpoints; opens offline)"
echo "    TensorBoard: tensorboard --logdir $run/tensorboard"
echo "==> the cluster is stopped; go on with the README's 'Using it' lines:"
echo "    scripts/slurm-local.sh start; source scripts/env.sh; hpctrain status $run"
