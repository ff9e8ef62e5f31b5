#!/usr/bin/env bash
# Surviving the loss of a node inside the allocation (docs/resilience.md), on a 4-node cluster of
# this test's own (scripts/slurm-multinode.sh; nodes are killed and cut here, so no other test may
# share it). CIFAR ResNet-20 on synthetic data, 3 training nodes x 2 ranks and 1 spare:
#   reference  the run without a failure: its final weights;
#   kill       every process of a training node that is not rank 0's (slurmd included) gets
#              SIGKILL at a random step;
#   cut        the link of rank 0's node goes down at a random step (no FIN, no RST: a power cut
#              as its peers see it), so the next step needs a new rank 0 and a new store;
# each time: the same job ends completed without a requeue, the ledger has a node_lost line (cause
# node_lost, the lost node, the spare added, detection, stop and recovery times) then a completed
# one, hpctrain status tells of the loss, at most one checkpoint interval of steps is redone, and
# the final weights equal the reference's bitwise. Then
#   shrink     on_node_loss = "shrink" without a spare, training with local SGD (an averaging
#              every 5 steps, checkpoints every 7): a node is killed in the middle of an epoch,
#              the run finishes on 2 nodes (4 ranks) from the mean of the 6 ranks' models, and
#              across the interrupted epoch no sample is seen twice and none is skipped but the
#              last partial global batch.
# The steps are random; HPCTRAIN_RESILIENCE_STEPS="KILL CUT SHRINK" repeats a run.
# Needs HPCTRAIN, WORKER, HPCTRAIN_MN_SCRIPT and SLURM_CONF (DIR/slurm.conf of the cluster to start).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/namespace_lib.sh"
read -r kill_at cut_at shrink_at <<<"${HPCTRAIN_RESILIENCE_STEPS:-$((20 + RANDOM % 130)) $((20 + RANDOM % 130)) $((24 + RANDOM % 14))}"
echo "node losses at steps: kill $kill_at, cut $cut_at, shrink $shrink_at (HPCTRAIN_RESILIENCE_STEPS)"

# run_with_loss NAME SPEC STEP HOW NODE-CHOICE: submits, waits for STEP, loses a node (HOW: kill or
# cut; NODE-CHOICE: rank0 or other), waits for the end; prints the lost node.
run_with_loss() {
  local name=$1 spec=$2 at=$3 how=$4 which=$5 run=$work/$1 node r0
  submit "$spec" > /dev/null
  wait_for 300 "$name: step $at" reached "$run" "$at"
  r0=$(rank0_node "$run")
  [[ $r0 =~ ^node[0-9]+$ ]] || fail "$name: rank 0's node unknown ('$r0')"
  if [[ $which == rank0 ]]; then
    node=$r0
  else
    # A node of the training step other than rank 0's and the batch host (node1, the first).
    node=$(scontrol show hostnames "$(squeue --noheader --steps --format='%i %N' | awk '$1 ~ /\.0$/ {print $2}')" |
           grep -vx -e "$r0" -e node1 | head -n 1)
  fi
  [[ $node =~ ^node[0-9]+$ ]] || fail "$name: no node to lose ('$node')"
  echo "$name: $how $node at step $(last_step "$run") (rank 0 on $r0)" >&2
  "$HPCTRAIN_MN_SCRIPT" "$how" "$cluster" "$node" || fail "$name: $how $node"
  wait_for 400 "$name: end of the run" done_ledger "$run"
  echo "$node"
}

# check_replaced NAME LOST: the ledger, status and redone steps of a run with a spare.
check_replaced() {
  local name=$1 lost=$2 run=$work/$1 every=10
  echo "--- $name ledger"; cat "$run/attempts.jsonl"
  [[ $(wc -l < "$run/attempts.jsonl") -eq 2 ]] || fail "$name: expected 2 ledger lines"
  jq -e -s --arg lost "$lost" '
    (.[0] | .reason == "node_lost" and .cause == "node_lost" and .lost_nodes == $lost and
            .added_nodes == "node1" and
            .step == 0 and .world_size == 6 and (.stop_s | type == "number") and
            (.recover_s | type == "number") and (.detected | test("Z$")) and
            (.detected_by | length > 0)) and
    (.[1] | .reason == "completed" and .step == 1 and .world_size == 6 and .last_step == 200 and
            (.nodes | split(",") | index($lost) == null) and (.nodes | contains("node1"))) and
    (map(.job_id) | unique | length == 1) and (map(.restart) | unique == [0])' \
    "$run/attempts.jsonl" > /dev/null || fail "$name: ledger is not one node loss then completion"
  "$HPCTRAIN" status "$run" > "$work/$name.status" || fail "$name: status"
  grep -q "node lost: *$lost" "$work/$name.status" || fail "$name: status: $(cat "$work/$name.status")"
  # The goodput ledger adds up with a node lost; the loss and the spare's start are recovery.
  goodput_adds_up "$run"
  "$HPCTRAIN" status --json "$run" | jq -e '.goodput.recovery_s > 0' > /dev/null ||
    fail "$name: no recovery in the goodput ledger"
  # Steps redone: those the first step took after the checkpoint the second resumed from. The
  # first step's last train line is the last one before the second step's "started" record (a
  # loss right after a checkpoint redoes none, and the steps then go on without a repeat).
  local resumed reached
  resumed=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .resumed_from' "$run/metrics.jsonl")
  reached=$(jq -r 'if .kind == "started" and .tag == "0.1" then "resumed"
                   elif .kind == "train" then .step else empty end' "$run/metrics.jsonl" |
    awk '$1 == "resumed" {exit} {prev = $1} END {print prev}')
  [[ $resumed =~ ^[0-9]+$ && $reached =~ ^[0-9]+$ ]] || fail "$name: resumed '$resumed' reached '$reached'"
  echo "$name: resumed from step $resumed after reaching $reached: $((reached - resumed)) steps redone"
  (( reached - resumed <= every )) || fail "$name: $((reached - resumed)) steps redone, more than a checkpoint interval"
  [[ $(fingerprint "$run") == "$reference" ]] ||
    fail "$name: final weights $(fingerprint "$run" | tr '\n' ' ') differ from the uninterrupted run's $reference"
}

# The uninterrupted reference.
fresh_cluster 4
ref_spec=$(spec reference 3)
submit "$ref_spec" > /dev/null
wait_for 400 "end of the reference run" done_ledger "$work/reference"
[[ $(ledger_field "$work/reference" 1 reason) == completed ]] || fail "reference run did not complete"
reference=$(fingerprint "$work/reference")
[[ $reference =~ ^0x[0-9a-f]+$ ]] || fail "reference: one fingerprint expected, got '$reference'"
echo "reference: $reference"

lost=$(run_with_loss kill "$(spec kill 3)" "$kill_at" kill other) || exit 1
check_replaced kill "$lost"

fresh_cluster 4
lost=$(run_with_loss cut "$(spec cut 3)" "$cut_at" cut rank0) || exit 1
check_replaced cut "$lost"
new_r0=$(rank0_node "$work/cut")
[[ $new_r0 != "$lost" ]] || fail "cut: rank 0 still on the cut node"

# Shrink: three nodes, no spare; the lost node's place is not filled. Checkpoints every 7 steps so
# the resumed position is inside an epoch; three epochs, whatever the step count per epoch.
fresh_cluster 3
shrink_spec=$(spec shrink 3 -resilience.spare_nodes resilience.on_node_loss=shrink train.epochs=3 \
  -train.max_steps checkpoint.every_steps=7 train.sync=local_sgd train.sync_every_steps=5)
# Every rank traces its batches (sbatch passes the submitter's environment on).
lost=$(HPCTRAIN_TRACE_SAMPLES=$work/shrink/trace run_with_loss shrink "$shrink_spec" "$shrink_at" kill other) ||
  exit 1
run=$work/shrink
echo "--- shrink ledger"; cat "$run/attempts.jsonl"
jq -e -s --arg lost "$lost" '
  (.[0] | .reason == "node_lost" and .cause == "node_lost" and .lost_nodes == $lost and
          .added_nodes == "" and .world_size == 6) and
  (.[1] | .reason == "completed" and .world_size == 4 and (.nodes | split(",") | length == 2))' \
  "$run/attempts.jsonl" > /dev/null || fail "shrink: ledger is not a loss then completion on 4 ranks"
"$HPCTRAIN" status "$run" | grep -q "shrank to 4 ranks" || fail "shrink: status: $("$HPCTRAIN" status "$run")"
grep -rqs "local SGD: the checkpoint's 6 ranks' models and optimizer states averaged for 4 ranks" \
  "$run/logs" || fail "shrink: the resumed step did not start local SGD from the 6 ranks' mean"
# Every rank's trace: "epoch step sample...", one line a batch, a file per step of the script
# (trace.RESTART.STEP.rank-R). The first step's batches from the resumed checkpoint on were
# trained again: they do not count.
resumed=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .resumed_from' "$run/metrics.jsonl")
[[ $resumed =~ ^[0-9]+$ ]] || fail "shrink: no resumed step"
python3 - "$run" "$resumed" <<'PY' || fail "shrink: samples of the interrupted epoch"
import collections, glob, sys
run, resumed = sys.argv[1], int(sys.argv[2])
per_epoch = 960
seen = collections.defaultdict(list)  # epoch -> samples
for tag in ("0.0", "0.1"):
    files = sorted(glob.glob(f"{run}/trace.{tag}.rank-*"))
    assert len(files) == (6 if tag == "0.0" else 4), f"step {tag}: trace files {files}"
    for path in files:
        for line in open(path):
            epoch, step, *samples = map(int, line.split())
            if tag == "0.0" and step >= resumed:
                continue  # undone by the resume
            seen[epoch] += samples
last_batch = 4 * 8  # the global batch after the shrink; 960 is a multiple of 6 * 8 too
for epoch, samples in sorted(seen.items()):
    counts = collections.Counter(samples)
    twice = [s for s, n in counts.items() if n > 1]
    missing = per_epoch - len(counts)
    print(f"epoch {epoch}: {len(samples)} batches' samples, {len(counts)} distinct, {len(twice)} seen twice, {missing} not seen")
    assert not twice, f"epoch {epoch}: samples seen twice: {twice[:10]}"
    assert 0 <= missing < last_batch, f"epoch {epoch}: {missing} samples skipped"
PY
# No way on in the allocation (max_node_losses = 0): the supervisor stops the step at once, records
# node_lost_requeued and requeues the job, as without resilience but without the wait.
fresh_cluster 4
fallback_spec=$(spec fallback 3 resilience.max_node_losses=0)
lost=$(run_with_loss fallback "$fallback_spec" 20 kill other) || exit 1
run=$work/fallback
echo "--- fallback ledger"; cat "$run/attempts.jsonl"
jq -e -s --arg lost "$lost" '
  length == 1 and (.[0] | .reason == "node_lost_requeued" and .cause == "node_lost" and
                   .lost_nodes == $lost and
                   .added_nodes == "" and .restart == 0 and (.stop_s | type == "number"))' \
  "$run/attempts.jsonl" > /dev/null || fail "fallback: ledger is not one node_lost_requeued line"
restarts=$(scontrol show job "$(jq -r .job_id "$run/attempts.jsonl")" -o | grep -o 'Restarts=[0-9]*')
[[ $restarts == Restarts=1 ]] || fail "fallback: the job was not requeued ($restarts)"
"$HPCTRAIN" status "$run" | grep -q "fell back to requeue" || fail "fallback: status: $("$HPCTRAIN" status "$run")"

echo "PASS: kill at $kill_at and cut at $cut_at recovered with the spare, bitwise equal weights; shrink at $shrink_at finished on 4 ranks; without a way on, the job was requeued"
