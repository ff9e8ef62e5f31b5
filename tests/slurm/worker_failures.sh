#!/usr/bin/env bash
# No hangs. A rank killed mid-collective: the others exit non-zero within the collective timeout
# plus a margin, naming the lost rank and its host (with --kill-on-bad-exit=1, as hpctrain's
# script runs srun, the whole step ends at once). Only 2 of 3 ranks started: both fail within the
# rendezvous timeout plus a margin, naming the missing rank.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/worker_lib.sh"
source "$here/../support/port.sh"
margin=15
host=$(hostname -s)

# kill_one VICTIM KILL_ON_BAD_EXIT: 3 ranks soak; VICTIM is SIGKILLed; prints the seconds from the
# kill to srun's end. The log is $work/kill-VICTIM-K.log.
kill_one() {
  local victim=$1 kobe=$2 spec log pid started
  spec=$(worker_spec 1 3 30 20)
  log=$work/kill-$victim-$kobe.log
  srun --ntasks=3 --mpi=pmix --kill-on-bad-exit="$kobe" "$WORKER" --spec "$spec" --selftest \
    --selftest-max-bytes 4096 --selftest-soak-s 120 > "$log" 2>&1 &
  local srun_pid=$!
  wait_for 90 "soak of all 3 ranks" bash -c "[[ \$(grep -c 'soak: pid' '$log') == 3 ]]"
  pid=$(sed -n "s/^\[rank $victim\/3 [^]]*\] soak: pid \([0-9]*\),.*/\1/p" "$log")
  [[ $pid =~ ^[0-9]+$ ]] || fail "no pid for rank $victim in $log"
  started=$SECONDS
  kill -KILL "$pid"
  local deadline=$((SECONDS + 20 + margin))
  while kill -0 "$srun_pid" 2>/dev/null; do
    (( SECONDS < deadline )) || { kill -KILL "$srun_pid"; fail "srun still running $((20 + margin)) s after rank $victim was killed"; }
    sleep 0.2
  done
  wait "$srun_pid" && fail "srun exited 0 after rank $victim was killed"
  echo $((SECONDS - started))
}

# Without --kill-on-bad-exit the survivors must notice themselves. Rank 0, which serves the store,
# names the lost rank and its host; the other survivor names it too, or, when the store stopped
# serving it after the peer died (c10d's store does that at times), says it cannot tell and that
# rank 0 may be lost. Both end with an error well within the deadline (kill_one checks).
t=$(kill_one 1 0)
log=$work/kill-1-0.log
grep -Eq "^\[rank 0/3 $host\] .*lost ranks? (.*, )?1 \($host\)" "$log" ||
  fail "rank 0 did not name lost rank 1: $(grep -v '^ ' "$log" | tail -n 8)"
grep -Eq "^\[rank 2/3 $host\] .*(lost rank 1 \($host\)|cannot reach the rendezvous store on rank 0)" "$log" ||
  fail "rank 2 gave no diagnosis: $(grep -v '^ ' "$log" | tail -n 8)"
echo "rank 1 killed: survivors reported it and ended in ${t}s"

# Rank 0 also serves the store: the survivors say it may be lost, naming its host.
t=$(kill_one 0 0)
log=$work/kill-0-0.log
for r in 1 2; do
  grep -q "^\[rank $r/3 $host\] .*rank 0 ($host)" "$log" ||
    fail "rank $r did not name rank 0: $(grep -v '^ ' "$log" | tail -n 8)"
done
echo "rank 0 killed: survivors reported it and ended in ${t}s"

# As hpctrain's script runs it: the step ends.
t=$(kill_one 2 1)
echo "rank 2 killed under --kill-on-bad-exit=1: step ended in ${t}s"

# Only 2 of 3 ranks start (torchrun's variables, so nothing else launches rank 2).
spec=$(worker_spec 1 3 8 20)
reserve_port port || fail "no port for the rendezvous"
started=$SECONDS
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 60 "$WORKER" --spec "$spec" --selftest > "$work/partial-$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1; do
  wait "${pids[$r]}" && fail "rank $r exited 0 although rank 2 never started"
  grep -q "3 ranks never arrived: 2\|1 of 3 ranks never arrived: 2" "$work/partial-$r.log" ||
    fail "rank $r did not name missing rank 2: $(cat "$work/partial-$r.log")"
done
elapsed=$((SECONDS - started))
(( elapsed <= 8 + margin )) || fail "2-of-3 rendezvous took ${elapsed}s, limit $((8 + margin))"
echo "2 of 3 ranks: both named rank 2 and ended in ${elapsed}s"
echo "ok"
