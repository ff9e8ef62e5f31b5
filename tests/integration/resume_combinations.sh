#!/usr/bin/env bash
# Exact resume in the combinations GPU users run, on the device path forced on the CPU
# (HPCTRAIN_GPU_PATH_ON_CPU=1: uint8 input normalised on the device, the agreement one step late,
# torch's fused optimizer kernels) with train.channels_last = true. A checkpoint's state is read
# back as contiguous tensors; the fused kernels need each state tensor laid out as its
# channels_last parameter (on a GPU they refuse anything else, on the CPU they compute wrong
# updates without a word), so a resume that loses the layout ends with other weights here.
#
#   resume_combinations.sh WORKER COMBO [static]
# static: the stopped and resumed runs take the static step's eager twin (train.cuda_graphs, the
#   step a GPU captures as CUDA graphs: static buffers, the learning rate and loss scaler on the
#   device, gradients refilled in place), the uninterrupted one today's step: the twin must equal
#   it bitwise over the resume, and say it checked its fixed addresses.
# COMBO: sgd-fp32 | adamw-fp32 | sgd-bf16 | sgd-fp16 | adamw-fp16 | localsgd-fp32 | fusedbn-bf16
#   (bf16: what the first GPU run's resume crashed on, bf16 autocast on the CPU here; fusedbn:
#   model.fused_bn, the batch norms as the fused op's reference, its running statistics and batch
#   counts restored through the state dict)
#   fp16 runs on the CPU (HPCTRAIN_FP16_ON_CPU) with the loss scale starting at 2^24 and growing
#   every 3 clean steps, so steps overflow, are skipped and the scale moves across the stop;
#   localsgd: train.sync = "local_sgd" (an averaging every 3 steps after 2 of all-reduce, the
#   Nesterov outer step: per-rank state, anchor and outer momentum are restored).
# 2 ranks, uninterrupted, then stopped by SIGUSR2 at a random step of the second epoch and
# resumed: the final weights must be bitwise equal.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"
combo=$2
mode=${3:-}
export HPCTRAIN_GPU_PATH_ON_CPU=1

case $combo in
  sgd-fp32) config=(train.optimizer.name=sgd train.precision=fp32) ;;
  adamw-fp32) config=(train.optimizer.name=adamw train.optimizer.lr=0.002 train.precision=fp32) ;;
  sgd-bf16) config=(train.optimizer.name=sgd train.precision=bf16) ;;
  sgd-fp16) config=(train.optimizer.name=sgd train.precision=fp16) ;;
  fusedbn-bf16) config=(train.optimizer.name=sgd train.precision=bf16 model.fused_bn=true) ;;
  adamw-fp16) config=(train.optimizer.name=adamw train.optimizer.lr=0.002 train.precision=fp16) ;;
  localsgd-fp32)
    config=(train.optimizer.name=sgd train.precision=fp32 train.sync=local_sgd
            train.sync_every_steps=3 train.sync_warmup_steps=2 train.outer_optimizer=nesterov) ;;
  *) echo "resume_combinations.sh: unknown combination '$combo'" >&2; exit 2 ;;
esac
size=16
# fp16 on the CPU is torch's emulated half, about 6 images/s at 16x16 here: 8x8 images keep the
# four runs well inside the test's limit on a loaded 2-core machine (the layouts under test do
# not depend on the image size).
[[ $combo == *fp16 ]] && size=8 && export HPCTRAIN_FP16_ON_CPU=1 \
  HPCTRAIN_FP16_INIT_SCALE=16777216 HPCTRAIN_FP16_GROWTH_INTERVAL=3

make_spec() {  # make_spec NAME [KEY=VALUE...]: 2 epochs of 16 steps at 2 ranks
  local name=$1; shift
  synthetic_spec job.name="$name" job.tasks_per_node=2 job.run_dir="$work/$name" \
    data.synthetic_samples=256 data.synthetic_image_size=$size train.epochs=2 train.batch_size=8 \
    train.threads=1 train.log_every_steps=4 train.eval_every_epochs=0 train.optimizer.lr=0.02 \
    train.channels_last=true checkpoint.every_steps=0 "${config[@]}" "$@" > "$work/$name.toml"
}
static=()
[[ $mode == static ]] && static=(train.cuda_graphs=true)

make_spec straight
launch straight 2 "$work/straight.log"
finish; [[ $statuses == "0 0" ]] || fail "$combo: uninterrupted run exited '$statuses'"
grep -q "the device path (uint8 input" "$work/straight.log.rank0" \
  || fail "$combo: the run did not take the device path"
want=$(fingerprint "$work/straight.log")
[[ -n $want ]] || fail "$combo: no fingerprint"

make_spec stopped "${static[@]}"
launch_to_stop stopped 2 "$work/stopped.log" $((17 + RANDOM % 10))
finish; [[ $statuses == "75 75" ]] || fail "$combo: stopped run exited '$statuses', want '75 75'"
stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/stopped.log.rank0" | grep -oE '[0-9]+$')
[[ -n $stopped_at ]] && (( stopped_at < 32 )) || fail "$combo: no stop before the last step"
launch stopped 2 "$work/stopped.log"
finish; [[ $statuses == "0 0" ]] || fail "$combo: resumed run exited '$statuses'"
grep -q "resuming from checkpoint step $stopped_at " "$work/stopped.log.rank0" \
  || fail "$combo: did not resume at step $stopped_at"
got=$(fingerprint "$work/stopped.log")
if [[ $mode == static ]]; then
  grep -q "static step: the eager twin" "$work/stopped.log.rank0" \
    || fail "$combo: the resumed run did not take the static step"
  grep -qE "tensors at fixed addresses, checked in [1-9][0-9]* steps" "$work/stopped.log.rank0" \
    || fail "$combo: the static step checked no step's addresses"
  combo="$combo (static step)"
fi
echo "$combo, channels_last, device path on the CPU: stopped at step $stopped_at of 32;" \
     "fingerprints: uninterrupted $want, resumed $got"
[[ $got == "$want" ]] || fail "$combo: resumed weights differ from the uninterrupted run's"
echo "resume_combinations $combo: ok"
