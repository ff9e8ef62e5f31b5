#!/usr/bin/env bash
# hpctrain-worker under a real srun on the one-node cluster, with and without PMIx, at 2 and 4
# ranks, and under Open MPI's mpirun: --describe-env resolves distinct ranks, --selftest passes,
# and DDP on shards matches one rank on the full batch.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/worker_lib.sh"

for mpi in pmix none; do
  for n in 2 4; do
    spec=$(worker_spec 1 "$n")
    log=$work/selftest-$mpi-$n.log
    timeout 180 srun --ntasks="$n" --mpi="$mpi" --kill-on-bad-exit=1 "$WORKER" --spec "$spec" \
      --selftest --selftest-max-bytes 1048576 > "$log" 2>&1 || fail "selftest $mpi x$n: $(tail -n 5 "$log")"
    selftest_passes "$log" "$n" || fail "selftest $mpi x$n: no pass line: $(tail -n 5 "$log")"
  done
  # --describe-env: every rank once, the same rendezvous for all, PMIx only when asked for.
  out=$(timeout 60 srun --ntasks=4 --mpi="$mpi" "$WORKER" --describe-env) || fail "describe-env $mpi"
  [[ $(jq -r .rank <<<"$out" | sort -n | tr '\n' ' ') == "0 1 2 3 " ]] || fail "ranks: $out"
  [[ $(jq -r .source <<<"$out" | sort -u) == slurm ]] || fail "source: $out"
  [[ $(jq -c .rendezvous <<<"$out" | sort -u | wc -l) == 1 ]] || fail "rendezvous differs: $out"
  want_pmix=$([[ $mpi == pmix ]] && echo true || echo false)
  [[ $(jq -r .pmix <<<"$out" | sort -u) == "$want_pmix" ]] || fail "pmix flag under $mpi: $out"
done

ddp_matches_single "$work" srun --ntasks=4 --mpi=pmix --kill-on-bad-exit=1
ddp_matches_single "$work" srun --ntasks=2 --mpi=none --kill-on-bad-exit=1
ddp_matches_single "$work" mpirun --allow-run-as-root --oversubscribe -np 2

# Open MPI's mpirun: ranks from OMPI_COMM_WORLD_*, rendezvous through mpirun's PMIx server.
spec=$(worker_spec 1 2)
log=$work/mpirun.log
timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$WORKER" --spec "$spec" --selftest \
  --selftest-max-bytes 1048576 > "$log" 2>&1 || fail "mpirun selftest: $(tail -n 5 "$log")"
selftest_passes "$log" 2 || fail "mpirun selftest: $(tail -n 5 "$log")"
out=$(timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 "$WORKER" --describe-env)
[[ $(jq -r .source <<<"$out" | sort -u) == openmpi ]] || fail "mpirun source: $out"
echo "ok"
