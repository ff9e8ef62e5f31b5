# For the worker's Slurm tests: WORKER and DDP_CHECK executables, and specs sized for a world.
: "${WORKER:?set WORKER to hpctrain-worker}"
: "${DDP_CHECK:?set DDP_CHECK to ddp_check}"

# worker_spec NODES TASKS_PER_NODE [RENDEZVOUS_S] [COLLECTIVE_S]: a spec for that world; its path.
worker_spec() {
  local f=$work/spec-$1x$2.toml
  cat > "$f" <<TOML
[job]
name = "worker"
run_dir = "$work/run"
nodes = $1
tasks_per_node = $2
[data]
synthetic = true
[train]
rendezvous_timeout_s = ${3:-60}
collective_timeout_s = ${4:-60}
TOML
  echo "$f"
}

# selftest_passes LOG RANKS: the selftest's verdict line for that many ranks is in LOG.
selftest_passes() {
  grep -q "# selftest passed: 0 failed checks over $2 ranks" "$1"
}

# ddp_matches_single DIR LAUNCH...: ddp_check with LAUNCH (srun/mpirun and options) against one
# process on the full batch; tolerance as in tests/integration/ddp_equivalence.sh.
ddp_matches_single() {
  local dir=$1; shift
  "$DDP_CHECK" --out "$dir/one.bin" --global-batch 48 >/dev/null || fail "ddp_check, 1 rank"
  timeout 180 "$@" "$DDP_CHECK" --out "$dir/many.bin" --global-batch 48 > "$dir/ddp.log" 2>&1 ||
    fail "ddp_check under '$*': $(tail -n 5 "$dir/ddp.log")"
  "$DDP_CHECK" --compare "$dir/one.bin" "$dir/many.bin" --tolerance 1e-6 ||
    fail "ranks on shards differ from one rank on the full batch under '$*'"
}
