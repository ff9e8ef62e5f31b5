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
#   graphs   the static step as CUDA graphs (train.cuda_graphs, docs/runtime.md "The static
#            step"), fp16 from 2^24 with channels_last and the fused batch norm, under the sync
#            debug mode "error": captures its three segments once, replays them every later step,
#            skips overflowing steps (the scale backs off), the loss falls, no host sync
#   graphs_twin  the graphs' replay against the static step's eager twin on the same GPU
#            (HPCTRAIN_TEST_STATIC_EAGER=1), bf16: bitwise equal, or within 4x what two runs of the
#            twin differ by
#   graphs_resume  resume (above) under CUDA graphs: captured again after the restore
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

gpu_spec() {  # gpu_spec NAME PRECISION CHANNELS_LAST [KEY=VALUE...]: 3 epochs of 64 steps of
  # 64 images, 32x32
  local name=$1 precision=$2 channels_last=$3
  shift 3
  synthetic_spec job.name="$name" job.tasks_per_node=1 job.gpus_per_node=1 \
    job.run_dir="$work/$name" data.synthetic_samples=4096 data.synthetic_image_size=32 \
    data.workers=4 train.epochs=3 train.batch_size=64 train.precision="$precision" \
    train.channels_last="$channels_last" train.log_every_steps=8 train.eval_every_epochs=0 \
    train.optimizer.lr=0.05 checkpoint.every_steps=50 "$@" > "$work/$name.toml"
}

# compare_weights A B C: relative L2 over the state dicts of runs A and C against A and B's (two
# runs that should agree but for the GPU's own spread); fails when A-C is over 4x A-B.
compare_weights() {
  "$python" - "$work" "$@" <<'PY'
import sys, torch
work, a, b, c = sys.argv[1:]
load = lambda n: torch.load(f"{work}/{n}/model.pt", map_location="cpu", weights_only=False)
wa, wb, wc = load(a), load(b), load(c)
def rel(x, y):
    num = sum(float((x[k].double() - y[k].double()).norm() ** 2) for k in x if x[k].is_floating_point())
    den = sum(float(x[k].double().norm() ** 2) for k in x if x[k].is_floating_point())
    return (num / den) ** 0.5
spread, got = rel(wa, wb), rel(wa, wc)
limit = max(4 * spread, 1e-6)
print(f"relative L2 to {a}: {b} {spread:.3e}, {c} {got:.3e} (limit {limit:.3e})")
sys.exit(0 if got <= limit else 1)
PY
}

# resume_case [KEY=VALUE...]: two uninterrupted runs, and one stopped by SIGUSR2 at a random step
# and resumed, bf16 channels_last; the resumed weights within the uninterrupted runs' spread.
resume_case() {
  local name stopped_at
  for name in straight1 straight2 stopped; do gpu_spec "$name" bf16 true "$@"; done
  launch straight1 1 "$work/straight1.log"; finish; [[ $statuses == 0 ]] || fail "straight1"
  launch straight2 1 "$work/straight2.log"; finish; [[ $statuses == 0 ]] || fail "straight2"
  launch stopped 1 "$work/stopped.log"
  stop_at_step "$work/stopped.log" $((10 + RANDOM % 100))
  finish; [[ $statuses == 75 ]] || fail "stopped run exited $statuses, want 75"
  stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/stopped.log.rank0" | grep -oE '[0-9]+$')
  launch stopped 1 "$work/stopped.log"; finish; [[ $statuses == 0 ]] || fail "resumed run"
  grep -q "resuming from checkpoint step $stopped_at " "$work/stopped.log.rank0" \
    || fail "did not resume at step $stopped_at"
  compare_weights straight1 straight2 stopped \
    || fail "resumed weights differ by more than the GPU's own spread"
}

# graphed NAME: the run's static step captured its segments once and replayed them after.
graphed() {
  local line
  line=$(grep -h "static step: CUDA graphs" "$work/$1.log.rank0" | tail -n 1)
  echo "$1: ${line#*static step: }"
  [[ $line =~ ", "([0-9]+)" segment captures, "([0-9]+)" replays, "([0-9]+)" graph nodes".*"checked in "([0-9]+)" steps" ]] \
    || fail "$1: the static step did not capture CUDA graphs"
  (( BASH_REMATCH[1] > 0 && BASH_REMATCH[2] > BASH_REMATCH[1] && BASH_REMATCH[3] > 0 &&
     BASH_REMATCH[4] > 0 )) \
    || fail "$1: ${BASH_REMATCH[1]} captures, ${BASH_REMATCH[2]} replays, ${BASH_REMATCH[3]} nodes, ${BASH_REMATCH[4]} checked steps"
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
    resume_case
    ;;
  graphs)
    gpu_spec graphs fp16 true train.cuda_graphs=true model.fused_bn=true
    HPCTRAIN_FP16_INIT_SCALE=16777216 HPCTRAIN_CUDA_SYNC_DEBUG=error launch graphs 1 "$work/graphs.log"
    finish; [[ $statuses == 0 ]] || fail "graphs run exited $statuses"
    graphed graphs
    scales=$(jq -s -r '[.[] | select(.kind == "train") | .loss_scale] | map(tostring) | join(" ")' \
      "$work/graphs/metrics.jsonl")
    echo "graphs: loss scales at the log lines: $scales"
    "$python" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 16777216 else 1)" "${scales%% *}" \
      || fail "graphs: the loss scale never backed off from 2^24 (no overflow skipped?)"
    expect_learns graphs
    ;;
  graphs_twin)
    for name in twin1 twin2 graphs; do gpu_spec "$name" bf16 true train.cuda_graphs=true; done
    HPCTRAIN_TEST_STATIC_EAGER=1 launch twin1 1 "$work/twin1.log"; finish
    [[ $statuses == 0 ]] || fail "twin1 exited $statuses"
    grep -q "static step: the eager twin" "$work/twin1.log.rank0" || fail "twin1 captured"
    HPCTRAIN_TEST_STATIC_EAGER=1 launch twin2 1 "$work/twin2.log"; finish
    [[ $statuses == 0 ]] || fail "twin2 exited $statuses"
    launch graphs 1 "$work/graphs.log"; finish; [[ $statuses == 0 ]] || fail "graphs exited $statuses"
    graphed graphs
    echo "fingerprints: twin $(fingerprint "$work/twin1.log") $(fingerprint "$work/twin2.log")," \
         "graphs $(fingerprint "$work/graphs.log")"
    compare_weights twin1 twin2 graphs || fail "the graphs' replay is off the eager twin"
    ;;
  graphs_resume)
    resume_case train.cuda_graphs=true
    graphed stopped
    ;;
  *) echo "unknown case $case"; exit 2 ;;
esac
echo "gpu $case: ok"
