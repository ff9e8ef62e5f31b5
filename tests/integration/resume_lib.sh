# Shared by the worker tests that run real hpctrain-worker processes on this machine (torchrun's
# variables, no launcher): a scratch directory, a small spec, launching and waiting for ranks.
#   source resume_lib.sh WORKER
set -uo pipefail
worker=$1
work=$(mktemp -d /var/tmp/hpctrain-resume.XXXXXX)
pids=()
cleanup() { kill -9 "${pids[@]}" 2>/dev/null; [[ -n ${KEEP_WORK:-} ]] || rm -rf "$work"; }
trap cleanup EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../support/fail.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../support/synthetic_spec.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../support/port.sh"
# What fail prints after its message: the end of every rank's log.
fail_context() { local f; for f in "$work"/*.rank?; do echo "--- $f"; tail -n 8 "$f"; done; }
# spec NAME [KEY=VALUE...]: a small run on synthetic data, 2 epochs of 32 steps at 2 ranks, a
# checkpoint every 5 steps; the keys given change it.
spec() {
  local name=$1
  shift
  synthetic_spec job.name="$name" job.tasks_per_node=2 job.run_dir="$work/$name" \
    data.synthetic_samples=1024 data.synthetic_image_size=16 train.epochs=2 train.batch_size=16 \
    train.threads=1 train.log_every_steps=4 train.eval_every_epochs=0 train.optimizer.lr=0.05 \
    checkpoint.every_steps=5 "$@" > "$work/$name.toml"
}

# launch NAME RANKS LOG: starts RANKS worker processes (torchrun's variables) in the background;
# each rank traces its samples to LOG.trace.rank-R.
launch() {
  local name=$1 n=$2 log=$3 p r
  # The last launch's port is not needed any more (its ranks have been waited for).
  [[ -n ${launch_port_fd:-} ]] && exec {launch_port_fd}>&-
  reserve_port p || fail "no port for the rendezvous"
  launch_port_fd=$reserved_port_fd
  pids=()
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$p \
      HPCTRAIN_TRACE_SAMPLES=$log.trace "$worker" --spec "$work/$name.toml" \
      >> "$log.rank$r" 2>&1 &
    pids+=($!)
  done
}

# finish: waits for every launched rank; their exit statuses, space-separated, in $statuses.
finish() {
  local all=() p
  for p in "${pids[@]}"; do wait "$p"; all+=($?); done
  pids=()
  statuses="${all[*]}"
}

# wait_for LOG RANK WHAT CMD...: polls CMD until it succeeds. The deadline measures a hang, not a
# slow machine: it fails, naming WHAT, when a launched rank has exited first (it will never come)
# or when neither RANK's sample trace nor its log (LOG.trace.rank-RANK, LOG.rankRANK) has grown
# for 120 s; a loaded machine that is merely slow waits longer.
wait_for() {
  local log=$1 rank=$2 what=$3 size last=-1 quiet_since=$SECONDS p
  shift 3
  until "$@"; do
    size=$(( $(stat -c %s "$log.trace.rank-$rank" 2>/dev/null || echo 0) +
             $(stat -c %s "$log.rank$rank" 2>/dev/null || echo 0) ))
    (( size != last )) && { last=$size; quiet_since=$SECONDS; }
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null || fail "a rank exited before $what"
    done
    (( SECONDS - quiet_since < 120 )) || fail "no progress for 120 s, waiting for $what"
    sleep 0.05
  done
}

# wait_for_step LOG STEP [RANK]: waits (wait_for) until RANK (default 0) has read the batch of
# global step STEP (its sample trace says so).
reached_step() {  # reached_step TRACE STEP
  local step
  step=$(tail -n 1 "$1" 2>/dev/null | cut -d' ' -f2)
  [[ $step =~ ^[0-9]+$ ]] && (( step >= $2 ))
}
wait_for_step() {
  local rank=${3:-0}
  wait_for "$1" "$rank" "rank $rank reached step $2" reached_step "$1.trace.rank-$rank" "$2"
}

# stop_at_step LOG STEP: once rank 0 has read the batch of global step STEP, sends SIGUSR2 to
# every rank. Steps, not seconds: a fast machine must not finish the run before the signal.
stop_at_step() {
  wait_for_step "$1" "$2"
  kill -USR2 "${pids[@]}" 2>/dev/null
}

# launch_to_stop NAME RANKS LOG STEP: launch, then stop_at_step LOG STEP, with rank 0 pausing
# STOP_WINDOW_S (default 10) seconds as it begins the step after STEP (HPCTRAIN_TEST_STALL, in
# its data wait; the others wait for it in the gradient all-reduce): the signal lands while the
# run cannot have gone further, so the stop comes at STEP or the step after (one more on the
# device path, which acts on the agreement a step late) however loaded the machine, and never
# after the run ended. The pause changes no number, only the time.
launch_to_stop() {
  HPCTRAIN_TEST_STALL=0:$(($4 + 1)):data:${STOP_WINDOW_S:-10} launch "$1" "$2" "$3"
  stop_at_step "$3" "$4"
}

fingerprint() {  # fingerprint LOG: rank 0's final weights fingerprint
  grep -ohE 'final weights fnv1a64 0x[0-9a-f]+' "$1.rank0" | tail -n 1 | awk '{print $NF}'
}

