#!/usr/bin/env bash
# Evicting a straggler's node (docs/resilience.md "Stragglers") and keeping lost nodes out across
# requeues, on a 4-node cluster of this test's own (scripts/slurm-multinode.sh; no other test may
# share it). CIFAR ResNet-20 on synthetic data, 3 training nodes x 2 ranks, 60 steps:
#   reference  the run without a slow node: its final weights;
#   evict      with a spare: every rank of node2 sleeps in every data wait
#              (HPCTRAIN_TEST_STALL=@node2:every:data:S), evict_stragglers on: after 3 log
#              windows the ranks checkpoint and exit 78, the supervisor replaces node2 with the
#              spare,
#              the same job completes, nothing is trained twice, and the final weights equal the
#              reference's bitwise;
#   hang       with a spare: both ranks of node3 stall at step 20 (alive): the hang watchdog names
#              them (hang_timeout_s = 8), every rank exits 77, the supervisor replaces node3 with
#              the spare, the job completes bitwise equal to the reference;
#   exclude    no spare, on_node_loss = "requeue": the same eviction requeues the job with node2
#              in its ExcNodeList; Slurm places the next attempt on the other three nodes, which
#              completes, again bitwise equal to the reference.
# Needs HPCTRAIN, WORKER, HPCTRAIN_MN_SCRIPT and SLURM_CONF (DIR/slurm.conf of the cluster to start).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/namespace_lib.sh"
delay=${HPCTRAIN_STRAGGLER_DELAY_S:-0.4}
slow_spec() {  # slow_spec NAME [KEY=VALUE]...
  local name=$1; shift
  spec "$name" 3 train.max_steps=60 train.log_every_steps=2 checkpoint.every_steps=10 "$@"
}
completed() { grep -q '"reason":"completed"' "$1/attempts.jsonl" 2>/dev/null; }

fresh_cluster 4
submit "$(slow_spec reference)" > /dev/null
wait_for 300 "end of the reference run" done_ledger "$work/reference"
completed "$work/reference" || fail "reference run did not complete: $(cat "$work/reference/attempts.jsonl")"
reference=$(fingerprint "$work/reference")
[[ $reference =~ ^0x[0-9a-f]+$ ]] || fail "reference: one fingerprint expected, got '$reference'"
echo "reference: $reference"

# evict: node2 trains first (the batch host, node1, is the spare).
HPCTRAIN_TEST_STALL="@node2:every:data:$delay" \
  submit "$(slow_spec evict resilience.evict_stragglers=true resilience.straggler_windows=3)" > /dev/null
run=$work/evict
wait_for 400 "evict: end of the run" done_ledger "$run"
echo "--- evict ledger"; cat "$run/attempts.jsonl"
jq -e -s '
  length == 2 and
  (.[0] | .reason == "node_lost" and .cause == "straggler" and .lost_nodes == "node2" and
          .added_nodes == "node1" and .exit_status == 78 and .nodes == "node2,node3,node4" and
          (.detected_by | test("^evicted, straggler: node node2 busy .* for 3 log windows in a row")) and
          (.recover_s | type == "number")) and
  (.[1] | .reason == "completed" and .nodes == "node3,node4,node1" and .last_step == 60)' \
  "$run/attempts.jsonl" > /dev/null || fail "evict: the ledger is not an eviction then completion"
grep -q 'in a row; evicting the node); last committed checkpoint: step [0-9]*; exiting for the step supervisor to replace the node' \
  "$run"/logs/*.out || fail "evict: rank 0 did not say why it stopped: $(grep -h 'stopping' "$run"/logs/*.out)"
evicted_at=$(jq -r 'select(.kind == "evict") | .step' "$run/metrics.jsonl")
resumed=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .resumed_from' "$run/metrics.jsonl")
[[ $evicted_at =~ ^[0-9]+$ && $resumed == "$evicted_at" ]] ||
  fail "evict: evicted at step '$evicted_at' but resumed from '$resumed' (steps trained twice)"
jq -e -s 'map(select(.kind == "evict")) | length == 1 and (.[0].hosts == ["node2"]) and (.[0].ranks | length == 2)' \
  "$run/metrics.jsonl" > /dev/null || fail "evict: the evict record"
"$HPCTRAIN" status "$run" > "$work/evict.status" || fail "evict: status"
grep -q "node lost: *node2" "$work/evict.status" || fail "evict: status: $(cat "$work/evict.status")"
[[ $(fingerprint "$run") == "$reference" ]] ||
  fail "evict: final weights $(fingerprint "$run" | tr '\n' ' ') differ from the reference's $reference"
echo "evict: node2 ($delay s a step slower) evicted at step $evicted_at, replaced by node1, resumed there; weights equal the reference's"

# hang: both ranks of node3 stall in their data wait at step 20, alive and beating: the hang
# watchdog names them, every rank exits 77 and the supervisor replaces node3 as a lost node.
HPCTRAIN_TEST_STALL="@node3:20:data:600" submit "$(slow_spec hang resilience.hang_timeout_s=8)" > /dev/null
run=$work/hang
wait_for 400 "hang: end of the run" done_ledger "$run"
echo "--- hang ledger"; cat "$run/attempts.jsonl"
jq -e -s '
  length == 2 and
  (.[0] | .reason == "node_lost" and .cause == "hang" and .lost_nodes == "node3" and
          .added_nodes == "node1" and .exit_status == 77 and
          (.detected_by | test("^hang watchdog: hang: no progress for [0-9.]+ s \\(hang timeout 8 s\\): rank [0-9] \\(node3\\) in data wait at step 20"))) and
  (.[1] | .reason == "completed" and .nodes == "node2,node4,node1" and .last_step == 60)' \
  "$run/attempts.jsonl" > /dev/null || fail "hang: the ledger is not a hang on node3 then completion"
[[ $(fingerprint "$run") == "$reference" ]] ||
  fail "hang: final weights $(fingerprint "$run" | tr '\n' ' ') differ from the reference's $reference"
echo "hang: node3's ranks hung at step 20, named, node3 replaced by node1; weights equal the reference's"

# exclude: no spare; the eviction requeues the job with node2 excluded.
fresh_cluster 4
HPCTRAIN_TEST_STALL="@node2:every:data:$delay" \
  submit "$(slow_spec exclude -resilience.spare_nodes resilience.on_node_loss=requeue \
            resilience.evict_stragglers=true resilience.straggler_windows=3)" > /dev/null
run=$work/exclude
wait_for 500 "exclude: completion after the requeue" completed "$run"
echo "--- exclude ledger"; cat "$run/attempts.jsonl"
jq -e -s '
  length == 2 and (map(.job_id) | unique | length == 1) and
  (.[0] | .reason == "node_lost_requeued" and .cause == "straggler" and .lost_nodes == "node2" and
          .excluded == "node2" and .restart == 0) and
  (.[1] | .reason == "completed" and .restart == 1 and (.nodes | split(",") | index("node2") == null))' \
  "$run/attempts.jsonl" > /dev/null || fail "exclude: the ledger is not an eviction, a requeue without node2, completion"
job=$(jq -r -s '.[0].job_id' "$run/attempts.jsonl")
scontrol show job "$job" -o | grep -q 'ExcNodeList=node2' || fail "exclude: job $job: $(scontrol show job "$job" -o)"
[[ $(fingerprint "$run") == "$reference" ]] ||
  fail "exclude: final weights $(fingerprint "$run" | tr '\n' ' ') differ from the reference's $reference"
echo "PASS: a straggler node evicted for the spare with bitwise equal weights; without a spare, requeued with ExcNodeList=node2 and completed on the others"
