#!/usr/bin/env bash
# The main job, end to end on a local Slurm cluster: start the cluster, submit
# configs/smoke-cpu.toml through `hpctrain submit`, follow it with `hpctrain status`, show its log
# and attempts ledger, stop the cluster.
#
# Until hpctrain-worker trains (the training issue), the job's ranks run tests/slurm/payload.sh in
# its place; it asks for one requeue, so the demo also shows the preemption protocol: exit 75,
# `scontrol requeue`, a second attempt with SLURM_RESTART_COUNT=1, both in one log. Then the real
# worker's bootstrap: `hpctrain-worker --selftest` under srun with PMIx on the same cluster.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${HPCTRAIN_BUILD_DIR:-build}
cluster=/var/tmp/hpctrain-demo-cluster
runs=/var/tmp/hpctrain-demo-runs

scripts/install-deps.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target hpctrain hpctrain-worker
hpctrain=$build/bin/hpctrain

echo "==> starting a one-node Slurm cluster in $cluster"
scripts/slurm-local.sh restart "$cluster" >/dev/null
trap 'scripts/slurm-local.sh stop "$cluster"' EXIT
export SLURM_CONF=$cluster/slurm.conf
sinfo

worker=$build/bin/hpctrain-worker
overrides=(--profile local --set "job.run_dir=$runs/{name}"
           --set "job.worker=$root/tests/slurm/payload.sh" --set job.env.PAYLOAD_MODE=requeue-once)
echo "==> the job's ranks run tests/slurm/payload.sh in place of the worker (training comes next)"
rm -rf "$runs/smoke-cpu"
"$hpctrain" check "${overrides[@]}" configs/smoke-cpu.toml
id=$("$hpctrain" submit "${overrides[@]}" configs/smoke-cpu.toml)
echo "==> job $id submitted; following it (a requeue takes about 30 s here)"
run=$runs/smoke-cpu
deadline=$((SECONDS + 600))
last=
while (( SECONDS < deadline )); do
  state=$("$hpctrain" status --json "$run" | jq -r '.slurm[0].state // "UNKNOWN"')
  [[ $state != "$last" ]] && echo "    $(date +%T) $state"
  last=$state
  case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 1
done
echo "==> hpctrain status $run"
"$hpctrain" status "$run"
echo "==> log ($run/logs/slurm-$id.out)"
cat "$run/logs/slurm-$id.out"
echo "==> attempts ledger ($run/attempts.jsonl)"
cat "$run/attempts.jsonl"
[[ $state == COMPLETED ]]

echo "==> hpctrain-worker --selftest under srun: 2 ranks, PMIx rendezvous, Gloo"
timeout 300 srun --ntasks=2 --mpi=pmix --kill-on-bad-exit=1 "$worker" --spec "$run/spec.toml" \
  --selftest --selftest-max-bytes $((16 << 20))
