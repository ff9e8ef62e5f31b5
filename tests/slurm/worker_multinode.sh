#!/usr/bin/env bash
# hpctrain-worker across 3 nodes (network namespaces with their own hostnames and addresses),
# 2 ranks each, with and without PMIx: every rank knows its node, --selftest passes and DDP on
# shards matches one rank on the full batch.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/worker_lib.sh"
nodes=${HPCTRAIN_MN_NODES:-3}
# Nodes have a private /tmp, as real compute nodes do; the build may live in /tmp (a CI clone).
# Run copies from the shared filesystem, as users must.
mkdir -p "$work/bin"
cp "$WORKER" "$DDP_CHECK" "$work/bin/"
WORKER=$work/bin/$(basename "$WORKER")
DDP_CHECK=$work/bin/$(basename "$DDP_CHECK")

for mpi in pmix none; do
  spec=$(worker_spec "$nodes" 2)
  log=$work/selftest-$mpi.log
  timeout 180 srun --nodes="$nodes" --ntasks-per-node=2 --mpi="$mpi" --kill-on-bad-exit=1 \
    "$WORKER" --spec "$spec" --selftest --selftest-max-bytes 1048576 > "$log" 2>&1 ||
    fail "selftest $mpi: $(tail -n 5 "$log")"
  selftest_passes "$log" $((nodes * 2)) || fail "selftest $mpi: $(tail -n 5 "$log")"
  out=$(timeout 60 srun --nodes="$nodes" --ntasks-per-node=2 --mpi="$mpi" "$WORKER" --describe-env) ||
    fail "describe-env $mpi"
  [[ $(jq -r '.hostname' <<<"$out" | sort -u | wc -l) == "$nodes" ]] || fail "hosts: $out"
  # Each rank's node index is its host's position in the node list.
  jq -e -s 'all(.[]; .nodes[.node_index] == .hostname)' <<<"$out" >/dev/null ||
    fail "node index does not match the host: $out"
done
ddp_matches_single "$work" srun --nodes="$nodes" --ntasks-per-node=2 --mpi=pmix --kill-on-bad-exit=1
echo "ok"
