#!/usr/bin/env bash
# Stands in for hpctrain-worker in the failure-budget tests: attempt N of the job (N =
# SLURM_RESTART_COUNT) exits with the N-th status of EXIT_SEQUENCE (from the spec's [job.env]),
# e.g. "3 75 0": fail, ask for a requeue, succeed; past the end, with the last one. Every rank
# leaves a mark per attempt in the run directory.
set -u
if [[ ${1:-} != --spec || ! -r ${2:-} ]]; then
  echo "exit_sequence: expected --spec FILE, got: $*" >&2
  exit 64
fi
restart=${SLURM_RESTART_COUNT:-0}
read -r -a statuses <<< "${EXIT_SEQUENCE:?set EXIT_SEQUENCE in [job.env]}"
status=${statuses[-1]}
(( restart < ${#statuses[@]} )) && status=${statuses[restart]}
: > "$HPCTRAIN_RUN_DIR/attempt$restart-rank${SLURM_PROCID:?}"
echo "exit_sequence: rank $SLURM_PROCID, attempt $((restart + 1)), exits $status"
# Exit 0 is the end of training: rank 0 leaves what the worker leaves then (a committed checkpoint
# whose trainer.json says finished), without which an exit 0 is no completed run.
if (( status == 0 && SLURM_PROCID == 0 )); then
  step=$HPCTRAIN_RUN_DIR/checkpoints/step-000000001
  mkdir -p "$step" && echo '{"finished": true}' > "$step/trainer.json" && : > "$step/manifest.json"
fi
exit "$status"
