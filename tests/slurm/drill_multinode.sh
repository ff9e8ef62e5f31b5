#!/usr/bin/env bash
# hpctrain drill's killed node on the namespace cluster (scripts/slurm-multinode.sh, 4 nodes of
# this test's own): a spec of 1 training node x 2 ranks with a spare, drilled with
# --events kill-node and --kill-command taking the node down for real (slurm-multinode.sh kill:
# every process in it, its slurmd included). The step supervisor finds the node lost and goes on
# on the spare: the table's row says node_lost with the node replaced, training resumed from a
# checkpoint, and the disturbed run ends with the undisturbed run's weights, bit for bit.
# Needs HPCTRAIN, WORKER, HPCTRAIN_MN_SCRIPT and SLURM_CONF (DIR/slurm.conf of the cluster to start).
# DRILL_EVENTS (default kill-node; CI's) and DRILL_STEPS (default 40) play more: with
# DRILL_EVENTS=preempt,requeue,hang,kill-node DRILL_STEPS=80 the whole default list of a spec with
# a spare, each row checked.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/namespace_lib.sh"

fresh_cluster 4
spec=$(spec drill 1 train.max_steps=80 train.log_every_steps=4)
# The nodes: the drill's kill command gets the node as $1, never in its text.
kill_command="\"$HPCTRAIN_MN_SCRIPT\" kill \"$cluster\" \"\$1\""
started=$SECONDS
events=${DRILL_EVENTS:-kill-node}
HPCTRAIN_TEST_STALL=0:every:data:0.3 "$HPCTRAIN" drill --events "$events" --steps "${DRILL_STEPS:-40}" \
  --timeout 300 --kill-command "$kill_command" --dir "$work/drills" "$spec" \
  > "$work/drill.out" 2> "$work/drill.err" ||
  fail "the drill failed: $(cat "$work/drill.out" "$work/drill.err")"
cat "$work/drill.out"
echo "drill on the namespace cluster: $((SECONDS - started)) s"
grep -Eq "^killed node +step [0-9]+ +node_lost .*node node[0-9] replaced.* from step [0-9]+ +[0-9.]+ s$" \
  "$work/drill.out" || fail "no survived 'killed node' row with the node replaced: $(cat "$work/drill.out")"
declare -A title=([preempt]="preemption notice" [requeue]="requeue" [hang]="rank stops answering")
for event in ${events//,/ }; do
  [[ $event == kill-node ]] && continue
  grep -Eq "^${title[$event]} +step [0-9]+ .* from step [0-9]+ +[0-9.]+ s$" "$work/drill.out" ||
    fail "no survived '${title[$event]}' row: $(cat "$work/drill.out")"
done
grep -Eq "^final weights .*fnv1a64 (0x[0-9a-f]+) = the undisturbed run's \1$" "$work/drill.out" ||
  fail "the weights row: $(cat "$work/drill.out")"
grep -q "drill: .*slurm-multinode.sh\" kill .* (with \$1 = node[0-9])" "$work/drill.err" ||
  fail "the drill did not say what it ran: $(cat "$work/drill.err")"
echo "drill_multinode: the killed node was replaced by the spare, the weights equal the undisturbed run's"
