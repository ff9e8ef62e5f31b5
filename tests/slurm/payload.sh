#!/usr/bin/env bash
# Stands in for hpctrain-worker in the launcher's Slurm tests. srun starts it once per rank with
# --spec FILE, exactly as it will start the worker; PAYLOAD_MODE (from the spec's [job.env])
# picks what it does.
set -u
if [[ ${1:-} != --spec || ! -r ${2:-} ]]; then
  echo "payload: expected --spec FILE, got: $*" >&2
  exit 64
fi
spec=$2
rank=${SLURM_PROCID:?}
# A job of a chain (the requeue refused) counts on from the jobs before it, as the supervisor does.
restart=$(( ${SLURM_RESTART_COUNT:-0} + ${HPCTRAIN_CHAIN_RESTART:-0} ))
mark=$HPCTRAIN_RUN_DIR/payload-rank$rank-restart$restart
echo "payload rank $rank of $SLURM_NTASKS, restart $restart, spec $spec"
# As the worker does: "[rank r/N host] " before each line, rank 0's progress on stdout, the other
# ranks' warnings on stderr only (srun sends them to the .err file).
if (( rank == 0 )); then
  echo "[rank $rank/$SLURM_NTASKS $(hostname -s)] payload on stdout, restart $restart"
else
  echo "[rank $rank/$SLURM_NTASKS $(hostname -s)] payload on stderr, restart $restart" >&2
fi
: > "$mark"
# wait_for_go [NAME]: returns once the test has written RUN_DIR/NAME (default go); exits 1 after
# 120 s without it.
wait_for_go() {
  local go=$HPCTRAIN_RUN_DIR/${1:-go}
  for _ in $(seq 1 600); do
    [[ -e $go ]] && return 0
    sleep 0.2
  done
  echo "payload: no $go within 120 s" >&2
  exit 1
}
# finish: what the worker leaves at the end of training (rank 0: a committed checkpoint whose
# trainer.json says finished), then exit 0; without it the step supervisor takes an exit 0 for no
# completed run.
finish() {
  if (( rank == 0 )); then
    local step=$HPCTRAIN_RUN_DIR/checkpoints/step-000000001
    mkdir -p "$step" && echo '{"finished": true}' > "$step/trainer.json" && : > "$step/manifest.json"
  fi
  exit 0
}
case ${PAYLOAD_MODE:-ok} in
  ok) finish ;;
  env)
    # Every NASTY_* variable, NUL-separated, as the rank sees it.
    for v in ${!NASTY_@}; do printf '%s=%s\0' "$v" "${!v}"; done > "$mark.env"
    finish ;;
  requeue-once) (( restart == 0 )) && exit 75; finish ;;
  requeue-always) exit 75 ;;
  go-then-requeue-twice)
    # The first two attempts each wait for their go file (go-0, go-1: the test changes the job
    # first), then ask to be requeued; the third completes.
    (( restart >= 2 )) && finish
    wait_for_go "go-$restart"
    exit 75 ;;
  fail) exit 3 ;;
  wait-for-go) wait_for_go; finish ;;
  sweep) grep -E '^lr = ' "$spec" > "$mark.lr"; finish ;;
  *) echo "payload: unknown PAYLOAD_MODE ${PAYLOAD_MODE}" >&2; exit 64 ;;
esac
