#!/usr/bin/env bash
# status's loss trend and node losses, list and logs on fixture run directories (no Slurm:
# SLURM_CONF names a missing file, so Slurm's states are unknown, a run's ledger tells whether it
# ended, and the commands must still work).
#   cli_ops_test.sh HPCTRAIN
set -uo pipefail
hpctrain=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SLURM_CONF=$tmp/no-such-slurm.conf
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/expect.sh"

# run_dir DIR JOB_ID [ARRAY_TASKS]: a submitted run directory of 2 nodes x 2 ranks.
run_dir() {
  mkdir -p "$1/logs"
  # A frozen spec as spec::load reads it (what logs and list use).
  printf '[job]\nname = "r"\nrun_dir = "%s"\nnodes = 2\ntasks_per_node = 2\n[data]\nsynthetic = true\n[train]\nepochs = 3\n' \
    "$1" > "$1/spec.toml"
  echo '#!/bin/bash' > "$1/job.sbatch"
  printf '{"job_id":"%s","submitted_at":"2026-11-22T02:48:07Z","array_tasks":%d}\n' "$2" "${3:-0}" \
    > "$1/submissions.jsonl"
}

# A run that was requeued once: train lines 20..200, then steps 120..200 again after the resume.
r=$tmp/root/group/resumed
run_dir "$r" 4711
{
  for s in 20 40 60 80 100 120 140 160 180 200; do
    printf '{"kind":"train","step":%d,"epoch":1,"loss":%s}\n' "$s" "$(awk -v s="$s" 'BEGIN { printf "%.3f", int(2000000 / (s + 100)) / 1000 }')"
  done
  echo '{"kind":"eval","step":100,"epoch":1,"loss":1.0,"top1":0.5}'
  for s in 120 140 160 180 200; do
    printf '{"kind":"train","step":%d,"epoch":2,"loss":%s}\n' "$s" "$(awk -v s="$s" 'BEGIN { printf "%.3f", int(1000000 / (s + 100)) / 1000 }')"
  done
  echo '{"kind":"train","step":220,"epoch":2,"loss":null}'
  echo '{"kind":"eval","step":220,"epoch":2,"loss":0.4,"top1":0.8125}'
} > "$r/metrics.jsonl"
printf '%s\n' '{"job_id":"4711","restart":0,"reason":"requeued","exit_status":75}' \
  '{"job_id":"4711","restart":1,"reason":"completed","exit_status":0}' > "$r/attempts.jsonl"
mkdir -p "$r/checkpoints/step-000000200" && echo '{}' > "$r/checkpoints/step-000000200/manifest.json"
# Committed three hours ago: an age that reads the same however slowly the test runs.
touch -d '3 hours ago' "$r/checkpoints/step-000000200/manifest.json"
cat > "$r/logs/slurm-4711.out" <<'LOG'
hpctrain: job 4711 attempt 1 on node[1-2] at 2026-11-22T02:48:10Z
[rank 0/4 node1] training resnet20
[rank 3/4 node2] a warning from rank 3
[rank 1/4 node1] rank 1 in attempt 1
hpctrain: attempt ended: status 75, requeued
hpctrain: job 4711 attempt 2 on node[1-2] at 2026-11-22T02:58:10Z
[rank 0/4 node1] resuming from checkpoint step 100
[rank 1/4 node1] rank 1 in attempt 2
srun: a line with no rank
hpctrain: attempt ended: status 0, completed
LOG
printf '[rank 3/4 node2] stderr of rank 3\n' > "$r/logs/slurm-4711.err"

# status: the trend over the 11 distinct steps (20..220), the resumed copies counted once.
expect 0 "trend:      loss 16\\.67 -> non-finite over steps 20\\.\\.220  .* \\(1 of 11 steps with a non-finite loss\\)" \
  "$hpctrain" status "$r"
json=$("$hpctrain" status --json "$r" 2>/dev/null) || check_failed "status --json"
[[ $(jq -r '.loss_trend | "\(.points) \(.non_finite) \(.first_step) \(.last_step) \(.last_loss)"' <<< "$json") == "11 1 20 220 null" ]] ||
  check_failed "status --json trend: $(jq -c .loss_trend <<< "$json")"
# The resumed steps' later (lower) losses count: step 200's is 1000/300.
[[ $(jq -r '.loss_trend.buckets[9]' <<< "$json") == "3.333" ]] || check_failed "step 200's value: $(jq -c .loss_trend <<< "$json")"
# 11 points in 10 buckets: the last holds steps 200 and 220 (null), so it shows step 200's loss.
[[ $(jq -r '.loss_trend.sparkline' <<< "$json") == "█▇▆▅▅▂▁▁▁▁" ]] || check_failed "sparkline: $(jq -c .loss_trend <<< "$json")"

# logs: the whole file, one attempt, one rank, both, stderr; bad requests name what exists.
"$hpctrain" logs "$r" | cmp - "$r/logs/slurm-4711.out" || check_failed "logs is not the file"
expect 0 "^hpctrain: job 4711 attempt 2 on .*resuming.*rank 1 in attempt 2.*srun: a line.*completed$" \
  "$hpctrain" logs --attempt 2 "$r"
[[ $("$hpctrain" logs --attempt 1 "$r" | wc -l) == 5 ]] || check_failed "attempt 1 is not 5 lines"
[[ $("$hpctrain" logs --rank 1 "$r") == $'[rank 1/4 node1] rank 1 in attempt 1\n[rank 1/4 node1] rank 1 in attempt 2' ]] ||
  check_failed "logs --rank 1: $("$hpctrain" logs --rank 1 "$r")"
[[ $("$hpctrain" logs --rank 1 --attempt 2 "$r") == '[rank 1/4 node1] rank 1 in attempt 2' ]] || check_failed "--rank 1 --attempt 2"
[[ $("$hpctrain" logs --rank 3 --stderr "$r") == '[rank 3/4 node2] stderr of rank 3' ]] || check_failed "--stderr"
# --rank R: its lines of the .out, then of the .err (where ranks other than 0 write); none is an
# error naming both files, not an empty success.
[[ $("$hpctrain" logs --rank 3 "$r") == $'[rank 3/4 node2] a warning from rank 3\n[rank 3/4 node2] stderr of rank 3' ]] ||
  check_failed "logs --rank 3: $("$hpctrain" logs --rank 3 "$r" 2>&1)"
expect 1 "no line of rank 2 in $r/logs/slurm-4711.out or $r/logs/slurm-4711.err" "$hpctrain" logs --rank 2 "$r"
expect 0 "slurm-4711.err holds 1 more line of rank 3, of attempts it does not mark" \
  "$hpctrain" logs --rank 3 --attempt 1 "$r"
expect 2 "--rank 4: the run has 4 ranks" "$hpctrain" logs --rank 4 "$r"
expect 1 "--attempt 3: .*slurm-4711.out holds attempts 1\\.\\.2" "$hpctrain" logs --attempt 3 "$r"
expect 2 "counts from 1" "$hpctrain" logs --attempt 0 "$r"
expect 2 "not a job array" "$hpctrain" logs --task 0 "$r"
expect 2 "attempt starts on stdout only" "$hpctrain" logs --attempt 1 --stderr "$r"
expect 1 "not a run directory" "$hpctrain" logs "$tmp"

# An array: --task picks the task's log; without it the error names the tasks.
a=$tmp/root/sweep
run_dir "$a" 5000 2
for t in 0 1; do
  mkdir -p "$a/task-00$t" && cp "$a/spec.toml" "$a/task-00$t/"
  echo "hpctrain: job 5000_$t attempt 1 on n1 at t" > "$a/logs/slurm-5000_$t.out"
done
echo '{"kind":"train","step":7,"epoch":1,"loss":1.5}' > "$a/task-001/metrics.jsonl"
expect 2 "job array 5000 with tasks 0\\.\\.1; pick one with --task T" "$hpctrain" logs "$a"
expect 0 "^hpctrain: job 5000_1 attempt 1" "$hpctrain" logs --task 1 "$a"
expect 2 "--task 2: job array 5000 has tasks 0\\.\\.1" "$hpctrain" logs --task 2 "$a"

# A dry run (never submitted) and a folder that is not a run.
d=$tmp/root/drafted
mkdir -p "$d" "$tmp/root/not-a-run/logs"
printf '[job]\nname = "d"\nrun_dir = "%s"\n[data]\nsynthetic = true\n[train]\nmax_steps = 900\n' "$d" \
  > "$d/spec.toml" && echo '#!/bin/bash' > "$d/job.sbatch"
expect 1 "never submitted" "$hpctrain" logs "$d"

# list: every run under ROOT (names relative to it), Slurm unreachable: said once, exit 0; the run
# whose ledger ends completed shows that, the others unknown.
out=$("$hpctrain" list "$tmp/root" 2> "$tmp/list.err") || check_failed "list failed: $(cat "$tmp/list.err")"
[[ $(grep -c "Slurm was not reachable (.*no Slurm controller was reachable" "$tmp/list.err") == 1 ]] || check_failed "list stderr: $(cat "$tmp/list.err")"
expected="RUN             STATE             STEP                TOP-1    RESTARTS  ENDED         GOODPUT       CHECKPOINT
drafted         unsubmitted       -/900               -        0         -             -             none
group/resumed   ledger:completed  220 (epoch 2/3)     81.25%   1         -             -             step 200, 3h ago
sweep/task-000  unknown           -                   -        0         -             -             none
sweep/task-001  unknown           7 (epoch 1/3)       -        0         -             -             none"
[[ $out == "$expected" ]] || check_failed "list output:
$out
expected:
$expected"
json=$("$hpctrain" list --json "$tmp/root" 2>/dev/null) || check_failed "list --json"
[[ $(jq -r '[.runs[] | "\(.name):\(.job_id):\(.state)"] | join(" ")' <<< "$json") == \
   "drafted:null:unsubmitted group/resumed:4711:ledger:completed sweep/task-000:5000_0:unknown sweep/task-001:5000_1:unknown" ]] ||
  check_failed "list --json: $json"
[[ $(jq -r '.slurm_error' <<< "$json") == *"no Slurm controller was reachable"* ]] || check_failed "list --json slurm_error"
# ROOT may be a run itself; a missing ROOT is an error naming it; the default is the current dir.
[[ $("$hpctrain" list --json "$r" 2>/dev/null | jq -r '.runs[0].name') == "." ]] || check_failed "list of a run dir"
expect 1 "$tmp/root/nope does not exist" "$hpctrain" list "$tmp/root/nope"
[[ $(cd "$tmp/root/group" && "$hpctrain" list --json 2>/dev/null | jq -r '.runs[0].name') == resumed ]] ||
  check_failed "list without ROOT does not search the current directory"
# Node losses (docs/run-directory.md): a job attempt that lost a node writes a line per srun step.
# "spare": an old-format line (no "step"), then attempt 2 loses node2 (a spare, node4, takes its
# place) and node3 (the world shrinks to 4 ranks) and completes: 2 job attempts in 4 lines.
l=$tmp/losses/spare
run_dir "$l" 12
printf '%s\n' \
  '{"job_id":"12","array_task_id":null,"restart":0,"nodes":"node[1-3]","start":"2026-11-23T23:30:00Z","end":"2026-11-23T23:35:00Z","exit_status":75,"reason":"requeued","last_step":20}' \
  '{"job_id":"12","array_task_id":null,"restart":1,"nodes":"node[1-3]","start":"2026-11-23T23:40:01Z","end":"2026-11-23T23:41:10Z","exit_status":76,"reason":"node_lost","last_step":40,"step":0,"world_size":6,"lost_nodes":"node2","added_nodes":"node4","detected":"2026-11-23T23:41:08.412Z","detected_by":"slurmd on node2 refused the connection","stop_s":1.3,"recover_s":22.8}' \
  '{"job_id":"12","array_task_id":null,"restart":1,"nodes":"node[1,3-4]","start":"2026-11-23T23:41:12Z","end":"2026-11-23T23:50:00Z","exit_status":76,"reason":"node_lost","last_step":80,"step":1,"world_size":6,"lost_nodes":"node3","added_nodes":"","detected":"2026-11-23T23:49:58.100Z","detected_by":"the NCCL watchdog timed out on rank 4","stop_s":2.5,"recover_s":30.4}' \
  '{"job_id":"12","array_task_id":null,"restart":1,"nodes":"node[1,4]","start":"2026-11-23T23:50:05Z","end":"2026-11-24T00:10:00Z","exit_status":0,"reason":"completed","last_step":200,"step":2,"world_size":4}' \
  > "$l/attempts.jsonl"
out=$("$hpctrain" status "$l" 2>&1) || check_failed "status of a run with node losses: $out"
expected_losses="attempts:   2 (1 restarts)
last:       completed, exit status 0, 2026-11-23T23:50:05Z .. 2026-11-24T00:10:00Z on node[1,4]
node losses: 2 (recovered in the allocation: 2)
node lost:  node2 at 23:41:08 (slurmd on node2 refused the connection); survivors stopped in 1.3 s; replaced by node4; training again after 22.8 s
node lost:  node3 at 23:49:58 (the NCCL watchdog timed out on rank 4); survivors stopped in 2.5 s; world shrank to 4 ranks; training again after 30.4 s"
[[ $out == *"$expected_losses"* ]] || check_failed "status with node losses:
$out
expected within it:
$expected_losses"
json=$("$hpctrain" status --json "$l" 2>/dev/null) || check_failed "status --json with node losses"
[[ $(jq -r '"\(.attempts) \(.restarts) \(.node_losses | length) \(.node_losses_recovered)"' <<< "$json") == "2 1 2 2" ]] ||
  check_failed "status --json counts: $json"
[[ $(jq -r '.node_losses[] | "\(.restart)/\(.step) \(.lost_nodes)>\(.added_nodes) \(.stop_s) \(.recover_s) \(.outcome) \(.world_size)>\(.next_world_size) \(.detected)"' <<< "$json") == \
   "1/0 node2>node4 1.3 22.8 replaced 6>6 2026-11-23T23:41:08.412Z
1/1 node3> 2.5 30.4 shrank 6>4 2026-11-23T23:49:58.100Z" ]] || check_failed "status --json node_losses: $(jq -c .node_losses <<< "$json")"
[[ $(jq -r '.node_losses[0].detected_by' <<< "$json") == "slurmd on node2 refused the connection" ]] ||
  check_failed "status --json detected_by: $(jq -c .node_losses <<< "$json")"

# "requeued": attempt 1 loses node1 and falls back to a requeue; in attempt 2 node2 is replaced
# but the replacement step fails before its first training step.
q=$tmp/losses/requeued
run_dir "$q" 13
printf '%s\n' \
  '{"job_id":"13","array_task_id":null,"restart":0,"nodes":"node[1-2]","start":"2026-11-23T23:40:01Z","end":"2026-11-23T23:41:10Z","exit_status":76,"reason":"node_lost_requeued","last_step":60,"step":0,"world_size":4,"lost_nodes":"node1","added_nodes":"","detected":"2026-11-23T23:41:09.000Z","detected_by":"srun reported node1 down","stop_s":0.8,"recover_s":null}' \
  '{"job_id":"13","array_task_id":null,"restart":1,"nodes":"node[2-3]","start":"2026-11-23T23:45:00Z","end":"2026-11-23T23:46:00Z","exit_status":76,"reason":"node_lost","last_step":60,"step":0,"world_size":4,"lost_nodes":"node2","added_nodes":"node3","detected":"2026-11-23T23:45:58.5Z","detected_by":"slurmd on node2 refused the connection","stop_s":1.04,"recover_s":null}' \
  '{"job_id":"13","array_task_id":null,"restart":1,"nodes":"node[3-4]","start":"2026-11-23T23:46:02Z","end":"2026-11-23T23:46:30Z","exit_status":1,"reason":"failed","last_step":60,"step":1,"world_size":4}' \
  > "$q/attempts.jsonl"
out=$("$hpctrain" status "$q" 2>&1) || check_failed "status of a requeued node loss: $out"
expected_losses="attempts:   2 (1 restarts)
last:       failed, exit status 1, 2026-11-23T23:46:02Z .. 2026-11-23T23:46:30Z on node[3-4]
node losses: 2 (recovered in the allocation: 0)
node lost:  node1 at 23:41:09 (srun reported node1 down); survivors stopped in 0.8 s; fell back to requeue
node lost:  node2 at 23:45:58 (slurmd on node2 refused the connection); survivors stopped in 1.0 s; replaced by node3; the replacement step never trained"
[[ $out == *"$expected_losses"* ]] || check_failed "status with a requeued node loss:
$out
expected within it:
$expected_losses"
json=$("$hpctrain" status --json "$q" 2>/dev/null) || check_failed "status --json with a requeued node loss"
[[ $(jq -r '"\(.attempts) \(.node_losses_recovered) \([.node_losses[] | "\(.reason):\(.outcome):\(.recover_s):\(.recovered)"] | join(" "))"' <<< "$json") == \
   "2 0 node_lost_requeued:requeued:null:false node_lost:replaced:null:false" ]] ||
  check_failed "status --json requeued node loss: $(jq -c '{attempts, node_losses}' <<< "$json")"
# list counts job attempts too; a run without node losses says nothing about them.
[[ $("$hpctrain" list --json "$tmp/losses" 2>/dev/null | jq -r '[.runs[] | "\(.name):\(.attempts):\(.restarts)"] | join(" ")') == \
   "requeued:2:1 spare:2:1" ]] || check_failed "list --json attempts: $("$hpctrain" list --json "$tmp/losses" 2>/dev/null)"
[[ $("$hpctrain" status "$r" 2>&1) == *"node los"* ]] && check_failed "status of a run without node losses mentions them"
[[ $("$hpctrain" status --json "$r" 2>/dev/null | jq -c '[.node_losses, .node_losses_recovered]') == "[[],0]" ]] ||
  check_failed "status --json without node losses"
# A frozen spec that does not load is said, not ignored: list names it (and shows the rest),
# logs --rank says it cannot check the rank and prints the log.
b=$tmp/broken/run
run_dir "$b" 14
printf '[train\n' > "$b/spec.toml"
echo "[rank 1/4 n1] a line" > "$b/logs/slurm-14.out"
"$hpctrain" list "$tmp/broken" > "$tmp/broken.out" 2> "$tmp/broken.err" || check_failed "list of a broken spec failed"
grep -q "list: run: its spec does not load (progress totals unknown): $b/spec.toml" "$tmp/broken.err" ||
  check_failed "list does not name the broken spec: $(cat "$tmp/broken.err")"
[[ $(grep -c '^run ' "$tmp/broken.out") == 1 ]] || check_failed "list drops the run with a broken spec"
[[ $("$hpctrain" list --json "$tmp/broken" 2>/dev/null | jq -r '.runs[0].spec_error') == "$b/spec.toml"* ]] ||
  check_failed "list --json spec_error"
expect 0 "cannot check --rank 1 against the run's ranks: $b/spec.toml.*a line" "$hpctrain" logs --rank 1 "$b"
finish
