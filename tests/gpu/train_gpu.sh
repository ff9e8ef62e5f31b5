#!/usr/bin/env bash
# The GPU path for real, one rank on one GPU with NCCL (runtime/train/device_input.hpp, docs/
# runtime.md "The GPU path"). Skips (77) where no GPU is present; FAILS where one is present but
# the worker cannot use it (tests/gpu/gpu_lib.sh).
#   train_gpu.sh WORKER PYTHON CASE
# CASE:
#   fp16     fp16 with loss scaling from 2^24: steps overflow, are skipped and the scale backs off
#            (metrics.jsonl's loss_scale below 2^24), and the loss still falls
#   bf16     bf16 autocast, channels_last: trains, the loss falls
#   nosync   fp16 + channels_last under CUDA's sync debug mode "error" (HPCTRAIN_CUDA_SYNC_DEBUG):
#            any operation in a step that makes the host wait for the GPU fails the run
#   resume   stopped by SIGUSR2 at a random step and resumed; its final weights differ from an
#            uninterrupted run's by no more than 4x what two uninterrupted runs differ by (the
#            GPU's own nondeterminism: cuDNN's autotuner, atomics), relative L2 over the state dict
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
worker=$1 python=$2 case=$3
source "$here/gpu_lib.sh"
source "$here/../integration/resume_lib.sh" "$worker"
# A failure keeps every rank log whole (keep_logs, gpu_lib.sh) before resume_lib's cleanup
# removes the work directory.
keep_then_cleanup() {
  local status=$?
  (( status == 0 || status == 77 )) \
    || keep_logs "gpu_train_$case" "$work"/*.log.rank* "$work"/*.toml
  cleanup
}
trap keep_then_cleanup EXIT

gpu_spec() {  # gpu_spec NAME PRECISION CHANNELS_LAST: 3 epochs of 64 steps of 64 images, 32x32
  synthetic_spec job.name="$1" job.tasks_per_node=1 job.gpus_per_node=1 job.run_dir="$work/$1" \
    data.synthetic_samples=4096 data.synthetic_image_size=32 data.workers=4 train.epochs=3 \
    train.batch_size=64 train.precision="$2" train.channels_last="$3" train.log_every_steps=8 \
    train.eval_every_epochs=0 train.optimizer.lr=0.05 checkpoint.every_steps=50 > "$work/$1.toml"
}

describe=$(env -u SLURM_JOB_ID "$worker" --describe-env 2>&1)
[[ $(jq -r .backend <<<"$describe" 2>/dev/null) == nccl ]] \
  || gpu_require "hpctrain-worker cannot use the GPU (a CPU build, or CUDA unusable): $describe"

# losses NAME: the train records' losses in metrics.jsonl, first and last
first_last_loss() {
  jq -s -r '[.[] | select(.kind == "train") | .loss] | "\(.[0]) \(.[-1])"' "$work/$1/metrics.jsonl"
}
expect_learns() {  # expect_learns NAME
  read -r first last <<<"$(first_last_loss "$1")"
  echo "$1: loss $first -> $last"
  "$python" -c "import math,sys; a,b=map(float,sys.argv[1:]); sys.exit(0 if math.isfinite(b) and b < a else 1)" \
    "$first" "$last" || fail "$1: the loss did not fall ($first -> $last)"
}

case $case in
  fp16)
    gpu_spec fp16 fp16 true
    HPCTRAIN_FP16_INIT_SCALE=16777216 launch fp16 1 "$work/fp16.log"
    finish; [[ $statuses == 0 ]] || fail "fp16 run exited $statuses"
    scales=$(jq -s -r '[.[] | select(.kind == "train") | .loss_scale] | map(tostring) | join(" ")' \
      "$work/fp16/metrics.jsonl")
    echo "fp16 loss scales at the log lines: $scales"
    first_scale=${scales%% *}
    "$python" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 16777216 else 1)" "$first_scale" \
      || fail "the loss scale never backed off from 2^24 (no overflow skipped?)"
    expect_learns fp16
    ;;
  bf16)
    gpu_spec bf16 bf16 true
    launch bf16 1 "$work/bf16.log"
    finish; [[ $statuses == 0 ]] || fail "bf16 run exited $statuses"
    grep -q "the device path" "$work/bf16.log.rank0" || fail "the GPU did not take the device path"
    expect_learns bf16
    ;;
  nosync)
    gpu_spec nosync fp16 true
    HPCTRAIN_CUDA_SYNC_DEBUG=error launch nosync 1 "$work/nosync.log"
    finish
    [[ $statuses == 0 ]] || fail "a step made the host wait for the GPU (sync debug mode error): exit $statuses"
    expect_learns nosync
    ;;
  resume)
    for name in straight1 straight2 stopped; do gpu_spec "$name" bf16 true; done
    launch straight1 1 "$work/straight1.log"; finish; [[ $statuses == 0 ]] || fail "straight1"
    launch straight2 1 "$work/straight2.log"; finish; [[ $statuses == 0 ]] || fail "straight2"
    launch stopped 1 "$work/stopped.log"
    stop_at_step "$work/stopped.log" $((10 + RANDOM % 100))
    finish; [[ $statuses == 75 ]] || fail "stopped run exited $statuses, want 75"
    stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/stopped.log.rank0" | grep -oE '[0-9]+$')
    launch stopped 1 "$work/stopped.log"; finish; [[ $statuses == 0 ]] || fail "resumed run"
    grep -q "resuming from checkpoint step $stopped_at " "$work/stopped.log.rank0" \
      || fail "did not resume at step $stopped_at"
    "$python" - "$work" <<'PY' || fail "resumed weights differ by more than the GPU's own spread"
import sys, torch
work = sys.argv[1]
load = lambda n: torch.load(f"{work}/{n}/model.pt", map_location="cpu", weights_only=False)
a, b, c = load("straight1"), load("straight2"), load("stopped")
def rel(x, y):
    num = sum(float((x[k].double() - y[k].double()).norm() ** 2) for k in x if x[k].is_floating_point())
    den = sum(float(x[k].double().norm() ** 2) for k in x if x[k].is_floating_point())
    return (num / den) ** 0.5
spread, resumed = rel(a, b), rel(a, c)
limit = max(4 * spread, 1e-6)
print(f"relative L2 to the uninterrupted run: another uninterrupted run {spread:.3e}, "
      f"stopped and resumed {resumed:.3e} (limit {limit:.3e})")
sys.exit(0 if resumed <= limit else 1)
PY
    ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
echo "gpu $case: ok"
