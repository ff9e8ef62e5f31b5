#!/usr/bin/env bash
# The static step (train.cuda_graphs) on real worker processes, its eager twin on the CPU
# (HPCTRAIN_GPU_PATH_ON_CPU=1; resume_combinations.sh and rollback.sh cover resume and rollback):
#   options    with gradient clipping, label smoothing, weight decay and Nesterov the run ends on
#              today's step's weights, bitwise, and says it checked its fixed addresses in every
#              step after warm-up
#   host-read  a host read planted in the step's body (HPCTRAIN_TEST_HOST_READ=1: the loss read on
#              the host) stops every rank with an error naming the read and the segment
#   cpu-job    without the device path the spec is refused at load, naming train.cuda_graphs
#   static_step.sh WORKER
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/resume_lib.sh" "$1"

make_spec() {  # make_spec NAME [KEY=VALUE...]: 2 epochs of 15 steps at 2 ranks
  local name=$1; shift
  synthetic_spec job.name="$name" job.tasks_per_node=2 job.run_dir="$work/$name" \
    data.synthetic_samples=250 data.synthetic_image_size=16 train.epochs=2 train.batch_size=8 \
    train.threads=1 train.log_every_steps=4 train.eval_every_epochs=0 train.optimizer.lr=0.05 \
    train.optimizer.momentum=0.9 train.optimizer.nesterov=true train.optimizer.weight_decay=5e-4 \
    train.grad_clip_norm=0.5 train.label_smoothing=0.1 train.channels_last=true \
    checkpoint.every_steps=0 "$@" > "$work/$name.toml"
}

export HPCTRAIN_GPU_PATH_ON_CPU=1
make_spec today
launch today 2 "$work/today.log"
finish; [[ $statuses == "0 0" ]] || fail "options: today's step exited '$statuses'"
make_spec twin train.cuda_graphs=true
launch twin 2 "$work/twin.log"
finish; [[ $statuses == "0 0" ]] || fail "options: the static step exited '$statuses'"
want=$(fingerprint "$work/today.log")
got=$(fingerprint "$work/twin.log")
[[ -n $want && $got == "$want" ]] || fail "options: the static step ends on $got, today's step on $want"
line=$(grep -h "static step:" "$work/twin.log.rank0")
[[ $line =~ "the eager twin (no capture)".*"checked in "([0-9]+)" steps" ]] ||
  fail "options: no static step line with its address checks"
# 30 steps: 3 of warm-up, the record after the fourth, every later one checked.
(( BASH_REMATCH[1] == 26 )) || fail "options: addresses checked in only ${BASH_REMATCH[1]} steps"
echo "options: weights $got as today's step's; ${line#*] }"

make_spec read train.cuda_graphs=true
HPCTRAIN_TEST_HOST_READ=1 launch read 2 "$work/read.log"
finish; [[ $statuses != "0 0" && $statuses != *" 0"* && $statuses != "0 "* ]] ||
  fail "host-read: a planted host read exited '$statuses'"
grep -q "the static step's segment 'forward-backward' read a tensor's value on the host (aten::item)" \
  "$work/read.log.rank0" || fail "host-read: no error naming the read"
echo "host-read: exited '$statuses': $(grep -ho "the static step's segment[^:]*" "$work/read.log.rank0" | head -n 1)"

unset HPCTRAIN_GPU_PATH_ON_CPU
make_spec cpu train.cuda_graphs=true
launch cpu 1 "$work/cpu.log"
finish; [[ $statuses != 0 ]] || fail "cpu-job: a CPU job with train.cuda_graphs was not refused"
grep -q "train.cuda_graphs.*CUDA graphs are a GPU path and this is a CPU job" "$work/cpu.log.rank0" ||
  fail "cpu-job: the error does not name train.cuda_graphs"
echo "cpu-job: refused: $(grep -ho "train.cuda_graphs.*CPU job[^)]*)" "$work/cpu.log.rank0" | head -n 1)"
echo "static_step: ok"
