#!/usr/bin/env bash
# The worker's heartbeat (docs/resilience.md) against a peer that goes silent without closing a
# socket, as a node cut off or powered off does (SIGSTOP here): 3 ranks, heartbeat_timeout_s = 3,
# the collective timeout 600 s, so only the heartbeat can end the wait.
#   1. rank 2 stops: ranks 0 and 1 exit 76 naming rank 2 ("no heartbeat"), well before the
#      collective timeout;
#   2. rank 0, which serves the store, stops: ranks 1 and 2 exit 76, saying the store on rank 0
#      does not answer, or (they share its node) that rank 0, their node's heartbeat leader, does
#      not beat;
#   3. nobody stops: all three finish with status 0 (the heartbeat does not fire at the end, when
#      ranks leave one by one).
#   heartbeat.sh WORKER
source "$(dirname "$0")/resume_lib.sh" "$1"

hb_spec() {  # hb_spec NAME EPOCHS
  spec "$1"
  sed -i "s/^tasks_per_node = 2/tasks_per_node = 3/" "$work/$1.toml"
  sed -i "s/^epochs = 2/epochs = $2/" "$work/$1.toml"
  cat >> "$work/$1.toml" <<TOML
[resilience]
heartbeat_timeout_s = 3
TOML
  sed -i 's/^\[train\]$/[train]\ncollective_timeout_s = 600/' "$work/$1.toml"
}

# silenced NAME VICTIM: rank VICTIM stops at step 6; the others must exit 76 within 60 s.
silenced() {
  local name=$1 victim=$2 r start elapsed
  hb_spec "$name" 20
  launch "$name" 3 "$work/$name.log"
  wait_for_step "$work/$name.log" 6
  kill -STOP "${pids[$victim]}"
  start=$SECONDS
  for r in 0 1 2; do
    (( r == victim )) && continue
    wait "${pids[$r]}"
    status=$?
    [[ $status == 76 ]] || fail "$name: rank $r exited $status, expected 76"
  done
  elapsed=$((SECONDS - start))
  kill -KILL "${pids[$victim]}" 2>/dev/null
  kill -CONT "${pids[$victim]}" 2>/dev/null
  wait "${pids[$victim]}" 2>/dev/null
  pids=()
  (( elapsed < 60 )) || fail "$name: the survivors took $elapsed s"
  echo "$name: rank $victim silent; the others exited 76 after $elapsed s"
}

silenced peer 2
for r in 0 1; do
  grep -q 'lost rank 2 (.*): no heartbeat for' "$work/peer.log.rank$r" ||
    grep -q 'rank 0 reports: lost rank 2' "$work/peer.log.rank$r" ||
    fail "peer: rank $r does not name rank 2"
done
grep -q 'stopping this rank (exit status 76)' "$work/peer.log.rank1" || fail "peer: rank 1's line"

silenced store 0
for r in 1 2; do
  grep -Eq 'no answer from the store on rank 0|no beat from rank 0 \(.*\), this node.s heartbeat leader' \
    "$work/store.log.rank$r" || fail "store: rank $r does not say rank 0 is silent"
done

hb_spec quiet 1
launch quiet 3 "$work/quiet.log"
finish
[[ $statuses == "0 0 0" ]] || fail "quiet: statuses $statuses"
grep -q 'heartbeat\|no answer\|lost rank' "$work"/quiet.log.rank? && fail "quiet: a false alarm"
echo "PASS"
