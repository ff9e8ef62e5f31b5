#!/usr/bin/env bash
# The rendered script's node-loss branches (docs/resilience.md), run for real by bash with
# stand-ins for Slurm's commands and a "slurmd" per node: each node is a loopback address
# (127.0.0.1 is the batch host) with a TCP listener on the cluster's SlurmdPort, and a node is
# lost when its listener is killed. The srun stand-in plays each step from a script per
# invocation (srun-N.sh): sleeps as a training step does, loses a node, writes the "started"
# record a worker would, exits with a worker's status.
#   replace   a node lost mid-step: the step is killed (scancel JOB.STEP, then srun), the spare
#             (the batch host) joins, the new step overlaps, the ledger has the loss and the
#             recovery time, the attempt completes;
#   noticed   the ranks notice first (srun exits 76): the supervisor probes after the fact;
#   shrink    no spare: the world shrinks to 4 ranks (HPCTRAIN_WORLD_SIZE);
#   fallback  max_node_losses = 0: node_lost_requeued and scontrol requeue;
#   gate      a node's slurmd unreachable from the start: nothing is watched, srun gets no
#             --nodelist.
#   term      TERM (scancel) while the supervisor is still setting up: no step starts, the
#             attempt is recorded as terminated; term-early: the same with the TERM before the
#             script hands over to the supervisor.
#   breaker   the fifth attempt in a row without a new checkpoint is not requeued (no_progress);
#   progress  the same history, but this attempt commits one: requeued.
#   credit    histories where an earlier attempt committed a checkpoint: that attempt counts as
#             progress, the ones after it do not (max 2 and 3: requeued or stopped at the right one).
#   hang      the ranks exit 77 after the hang watchdog named a node's ranks (metrics.jsonl): the
#             node is replaced as a lost one (cause hang), with no probe failing; hang-stuck: a
#             rank never exits after the verdict: the step is killed after the grace time;
#   evict     the ranks exit 78 after letting a straggler's node go: replaced (cause straggler);
#   exclude   the fallback's requeue puts the lost node in the job's ExcNodeList (not when the
#             partition would be left too small: small);
#   losses-limit  an eviction then a hang with max_node_losses = 1: the second is not recovered
#             in the allocation (node_lost_requeued);
#   failures-chain  a node lost breaks the chain of consecutive failures (max 2): requeued after
#             [failed, failed, node lost], not after [node lost, failed, failed];
#   avoid     an attempt placed again on a node lost in an earlier attempt of the job trains
#             without it while a spare is left (the ledger says avoided), and with it otherwise.
#   sbatch_node_loss.sh HPCTRAIN
hpctrain=$1
source "$(dirname "$0")/../../../support/expect.sh"
work=$(mktemp -d)
listeners=()
trap 'kill "${listeners[@]}" 2>/dev/null; rm -rf "$work"' EXIT
source "$(dirname "$0")/../../../support/port.sh"
reserve_port port || { echo "FAIL: no port for the stand-in slurmd"; exit 1; }
mkdir -p "$work/bin"

# "slurmd" on ADDRESS: accepts and closes connections until killed.
listen() {
  python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(64)
open(sys.argv[3], "w").write("up")
while True:
    c, _ = s.accept()
    c.close()' "$1" "$port" "$work/up-$1" &
  listeners+=($!)
  echo $! > "$work/listener-$1"
  for _ in $(seq 50); do [[ -f $work/up-$1 ]] && return; sleep 0.1; done
  echo "listener on $1 did not start" >&2; exit 1
}

cat > "$work/bin/scontrol" <<SH
#!/bin/bash
case "\$1 \$2" in
  "show hostnames")
    if [[ -n \$TERM_IN_SETUP ]]; then
      # scancel's TERM reaches the script while it waits for this answer.
      pid=\$\$
      while pid=\$(awk '/^PPid:/ {print \$2}' /proc/\$pid/status) && (( pid > 1 )); do
        [[ \$(tr '\\0' ' ' < /proc/\$pid/cmdline) == *" supervise "* ]] && { kill -TERM \$pid; break; }
      done
      sleep 0.5
    fi
    printf '%s\n' \$FAKE_NODES ;;
  "show config") echo "SlurmdPort              = $port" ;;
  *) echo "\$*" >> "\$RUN/scontrol.calls" ;;
esac
SH
# date: with TERM_BEFORE_HANDOVER, scancel's TERM reaches the script while it still sets up,
# before it hands over to the supervisor (its "date" for the attempt's start time).
cat > "$work/bin/date" <<'SH'
#!/bin/bash
if [[ -n ${TERM_BEFORE_HANDOVER:-} ]]; then
  pid=$$
  while pid=$(awk '/^PPid:/ {print $2}' /proc/$pid/status) && (( pid > 1 )); do
    [[ $(tr '\0' ' ' < /proc/$pid/cmdline) == "bash job.sbatch " ]] && { kill -TERM $pid; break; }
  done
fi
exec /bin/date "$@"
SH
cat > "$work/bin/squeue" <<'SH'
#!/bin/bash
[[ $* == *--steps* ]] && { echo 4242.0; echo 4242.batch; exit 0; }
echo "4242|RUNNING|None|fake[1-4]"
SH
# sinfo: the default partition (the job names none), of FAKE_PARTITION_NODES nodes.
cat > "$work/bin/sinfo" <<'SH'
#!/bin/bash
echo "debug*|up|infinite|1-infinite|${FAKE_PARTITION_NODES:-8}|(null)"
SH
cat > "$work/bin/scancel" <<'SH'
#!/bin/bash
echo "$*" >> "$RUN/scancel.calls"
SH
cat > "$work/bin/srun" <<'SH'
#!/bin/bash
n=$(( $(cat "$RUN/srun.count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$RUN/srun.count"
printf '%s\n' "$@" > "$RUN/srun-$n.argv"
echo "$HPCTRAIN_WORLD_SIZE $HPCTRAIN_STEP_TAG" > "$RUN/srun-$n.env"
started() { printf '{"kind":"started","step":1,"tag":"%s","wall_time":%s}\n' "$HPCTRAIN_STEP_TAG" "$(date +%s.%N)" >> "$RUN/metrics.jsonl"; }
# verdict KIND HOST: rank 0's record of a hang (KIND hang) or an evicted straggler (evict).
verdict() { printf '{"hosts":["%s"],"kind":"%s","message":"%s: rank 2 (%s) \\"stuck\\" at step 5","ranks":[2,3],"step":5,"tag":"%s","wall_time":%s}\n' "$2" "$1" "$1" "$2" "$HPCTRAIN_STEP_TAG" "$(date +%s.%N)" >> "$RUN/metrics.jsonl"; }
# finished: a worker's end of training (a committed checkpoint whose trainer.json says finished),
# then exit 0: an exit 0 without it is no completed run.
finished() {
  mkdir -p "$RUN/checkpoints/step-000000099"
  echo '{"finished": true}' > "$RUN/checkpoints/step-000000099/trainer.json"
  : > "$RUN/checkpoints/step-000000099/manifest.json"
  exit 0
}
source "$PLAY/srun-$n.sh"
SH
chmod +x "$work/bin"/*

# scenario NAME NODES "TOML" NODE...: renders the spec, starts the listeners of NODEs, runs the
# script as Slurm would with the plays in $work/NAME/play; leaves the run in $work/NAME.
scenario() {
  local name=$1 nodes=$2 toml=$3 node
  shift 3
  mkdir -p "$work/$name/play"
  cat > "$work/$name.toml" <<TOML
[job]
name = "$name"
nodes = $nodes
tasks_per_node = 2
run_dir = "$work/$name"
worker = "/bin/true"
[data]
synthetic = true
[resilience]
heartbeat_timeout_s = 2
$toml
TOML
  "$hpctrain" render "$work/$name.toml" > "$work/$name/job.sbatch" 2> "$work/$name/render.err" ||
    { check_failed "$name: render: $(cat "$work/$name/render.err")"; return; }
  cp "$work/$name.toml" "$work/$name/spec.toml"
  for node in "$@"; do listen "$node"; done
  (cd "$work/$name" && env -i PATH="$work/bin:/usr/bin:/bin" RUN="$work/$name" PLAY="$work/$name/play" \
     FAKE_NODES="$FAKE_NODES" TERM_IN_SETUP="${TERM_IN_SETUP:-}" TERM_BEFORE_HANDOVER="${TERM_BEFORE_HANDOVER:-}" FAKE_PARTITION_NODES="${FAKE_PARTITION_NODES:-8}" SLURM_JOB_ID=4242 SLURM_JOB_NODELIST='fake[1-4]' \
     SLURMD_NODENAME=127.0.0.1 SLURM_RESTART_COUNT=0 timeout 120 bash job.sbatch \
     > "$work/$name/out" 2> "$work/$name/err")
  echo $? > "$work/$name/status"
  kill "${listeners[@]}" 2>/dev/null
  wait "${listeners[@]}" 2>/dev/null
  listeners=()
  rm -f "$work"/up-*
}
line() { sed -n "${2}p" "$work/$1/attempts.jsonl"; }
# has RUN LINE FILTER: the ledger's LINE-th line exists and FILTER is true of it (jq -e passes an
# empty input).
has() {
  local text
  text=$(line "$1" "$2")
  [[ -n $text ]] && jq -e "$3" <<<"$text" > /dev/null ||
    check_failed "$1: ledger line $2 is not $3: ${text:-(no such line)}"
}
kill_node() { echo "sleep 1.5; kill \$(cat '$work/listener-$1')"; }

FAKE_NODES="127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4"
all=(127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4)

# replace
mkdir -p "$work/replace/play"
echo "$(kill_node 127.0.0.3); sleep 60" > "$work/replace/play/srun-1.sh"
echo 'sleep 0.5; started; sleep 2; finished' > "$work/replace/play/srun-2.sh"
scenario replace 3 'spare_nodes = 1' "${all[@]}"
[[ $(cat "$work/replace/status") == 0 ]] || check_failed "replace: script exited $(cat "$work/replace/status"): $(cat "$work/replace/err")"
grep -qx -- '--nodelist=127.0.0.2,127.0.0.3,127.0.0.4' "$work/replace/srun-1.argv" || check_failed "replace: first step's nodes: $(cat "$work/replace/srun-1.argv")"
grep -qx -- '--nodelist=127.0.0.2,127.0.0.4,127.0.0.1' "$work/replace/srun-2.argv" || check_failed "replace: second step's nodes: $(cat "$work/replace/srun-2.argv")"
grep -qx -- '--overlap' "$work/replace/srun-2.argv" || check_failed "replace: the second step does not overlap"
grep -qx -- '--overlap' "$work/replace/srun-1.argv" && check_failed "replace: the first step overlaps"
grep -qx -- '--signal=KILL 4242.0' "$work/replace/scancel.calls" || check_failed "replace: the step was not killed"
[[ $(cat "$work/replace/srun-2.env") == "6 0.1" ]] || check_failed "replace: second step's env: $(cat "$work/replace/srun-2.env")"
has replace 1 '.reason == "node_lost" and .lost_nodes == "127.0.0.3" and .added_nodes == "127.0.0.1" and .nodes == "127.0.0.2,127.0.0.3,127.0.0.4" and .step == 0 and .world_size == 6 and (.stop_s | type == "number") and (.recover_s | type == "number") and .detected_by == "slurmd on 127.0.0.3 refused the connection"'
has replace 2 '.reason == "completed" and .step == 1 and .nodes == "127.0.0.2,127.0.0.4,127.0.0.1" and .exit_status == 0'
[[ $(wc -l < "$work/replace/attempts.jsonl") == 2 ]] || check_failed "replace: ledger lines"

# noticed: the ranks exit 76 first; the supervisor finds the node lost after the fact.
mkdir -p "$work/noticed/play"
echo "kill \$(cat '$work/listener-127.0.0.4'); sleep 0.2; exit 76" > "$work/noticed/play/srun-1.sh"
echo 'started; sleep 1.5; finished' > "$work/noticed/play/srun-2.sh"
scenario noticed 3 'spare_nodes = 1' "${all[@]}"
has noticed 1 '.reason == "node_lost" and .lost_nodes == "127.0.0.4" and .exit_status == 76 and .added_nodes == "127.0.0.1"'
has noticed 2 '.reason == "completed"'

# shrink: no spare; the batch host trains from the start.
FAKE_NODES="127.0.0.1 127.0.0.2 127.0.0.3"
mkdir -p "$work/shrink/play"
echo "$(kill_node 127.0.0.2); sleep 60" > "$work/shrink/play/srun-1.sh"
echo 'started; sleep 1.5; finished' > "$work/shrink/play/srun-2.sh"
scenario shrink 3 'on_node_loss = "shrink"' 127.0.0.1 127.0.0.2 127.0.0.3
grep -qx -- '--nodelist=127.0.0.2,127.0.0.3,127.0.0.1' "$work/shrink/srun-1.argv" || check_failed "shrink: first step's nodes"
grep -qx -- '--nodelist=127.0.0.3,127.0.0.1' "$work/shrink/srun-2.argv" || check_failed "shrink: second step's nodes: $(cat "$work/shrink/srun-2.argv")"
grep -qx -- '--ntasks="4"\|--ntasks=4' "$work/shrink/srun-2.argv" || check_failed "shrink: second step's tasks: $(cat "$work/shrink/srun-2.argv")"
[[ $(cat "$work/shrink/srun-2.env") == "4 0.1" ]] || check_failed "shrink: HPCTRAIN_WORLD_SIZE: $(cat "$work/shrink/srun-2.env")"
has shrink 1 '.reason == "node_lost" and .added_nodes == "" and .world_size == 6'
has shrink 2 '.reason == "completed" and .world_size == 4'

# fallback: a spare, but no loss may be recovered in the allocation.
FAKE_NODES="127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4"
mkdir -p "$work/fallback/play"
echo "$(kill_node 127.0.0.2); sleep 60" > "$work/fallback/play/srun-1.sh"
scenario fallback 3 $'spare_nodes = 1\nmax_node_losses = 0' "${all[@]}"
[[ $(cat "$work/fallback/srun.count") == 1 ]] || check_failed "fallback: a second step ran"
has fallback 1 '.reason == "node_lost_requeued" and .lost_nodes == "127.0.0.2" and .added_nodes == "" and .exit_status == 76'
grep -qx 'requeue 4242' "$work/fallback/scontrol.calls" || check_failed "fallback: no scontrol requeue"
# exclude: the fallback's requeue is followed by the lost node in the job's ExcNodeList.
[[ $(cat "$work/fallback/scontrol.calls") == $'requeue 4242\nupdate JobId=4242 ExcNodeList=127.0.0.2' ]] ||
  check_failed "exclude: scontrol calls: $(cat "$work/fallback/scontrol.calls")"
has fallback 1 '.excluded == "127.0.0.2"'
# small: a partition of 4 nodes for a job of 4: excluding one would leave it pending forever.
mkdir -p "$work/small/play"
echo "$(kill_node 127.0.0.2); sleep 60" > "$work/small/play/srun-1.sh"
FAKE_PARTITION_NODES=4 scenario small 3 $'spare_nodes = 1\nmax_node_losses = 0' "${all[@]}"
[[ $(cat "$work/small/scontrol.calls") == 'requeue 4242' ]] || check_failed "small: scontrol calls: $(cat "$work/small/scontrol.calls")"
grep -q 'not excluding 127.0.0.2 on requeue: partition .* has 4 nodes and the job needs 4' "$work/small/err" ||
  check_failed "small: no reason given: $(cat "$work/small/err")"

# hang: the watchdog named 127.0.0.3's ranks; every rank exited 77, every slurmd still answers.
mkdir -p "$work/hang/play"
echo 'sleep 0.5; verdict hang 127.0.0.3; exit 77' > "$work/hang/play/srun-1.sh"
echo 'started; sleep 1.5; finished' > "$work/hang/play/srun-2.sh"
scenario hang 3 'spare_nodes = 1' "${all[@]}"
grep -qx -- '--nodelist=127.0.0.2,127.0.0.4,127.0.0.1' "$work/hang/srun-2.argv" || check_failed "hang: second step's nodes: $(cat "$work/hang/srun-2.argv")"
has hang 1 '.reason == "node_lost" and .cause == "hang" and .lost_nodes == "127.0.0.3" and .added_nodes == "127.0.0.1" and .exit_status == 77 and (.detected_by | startswith("hang watchdog: hang: rank 2 (127.0.0.3) \"stuck\" at step 5")) and (.recover_s | type == "number") and .stop_s < 5'
has hang 2 '.reason == "completed" and .nodes == "127.0.0.2,127.0.0.4,127.0.0.1"'
# hang-stuck: after the verdict a rank never exits (stuck in the kernel): the step is killed
# resilience.hang_grace_s later and the node replaced all the same.
mkdir -p "$work/hang-stuck/play"
echo 'verdict hang 127.0.0.4; sleep 60' > "$work/hang-stuck/play/srun-1.sh"
echo 'started; sleep 1.5; finished' > "$work/hang-stuck/play/srun-2.sh"
scenario hang-stuck 3 $'spare_nodes = 1\nhang_grace_s = 3' "${all[@]}"
grep -qx -- '--signal=KILL 4242.0' "$work/hang-stuck/scancel.calls" || check_failed "hang-stuck: the step was not killed"
has hang-stuck 1 '.reason == "node_lost" and .cause == "hang" and .lost_nodes == "127.0.0.4" and .stop_s >= 3 and .stop_s < 15'
has hang-stuck 2 '.reason == "completed" and .nodes == "127.0.0.2,127.0.0.3,127.0.0.1"'
# A 77 with no record of this step (an older step's, say) is an ordinary failure.
mkdir -p "$work/hang-unnamed/play"
printf '{"hosts":["127.0.0.3"],"kind":"hang","tag":"7.0","wall_time":1}\n' > "$work/hang-unnamed/metrics.jsonl"
echo 'exit 77' > "$work/hang-unnamed/play/srun-1.sh"
scenario hang-unnamed 3 'spare_nodes = 1' "${all[@]}"
has hang-unnamed 1 '.reason == "failed_requeued" and .exit_status == 77'
[[ $(cat "$work/hang-unnamed/srun.count") == 1 ]] || check_failed "hang-unnamed: a second step ran"

# evict: the ranks checkpointed and let 127.0.0.2 go as a straggler.
mkdir -p "$work/evict/play"
echo 'started; sleep 0.5; verdict evict 127.0.0.2; exit 78' > "$work/evict/play/srun-1.sh"
echo 'started; sleep 1.5; finished' > "$work/evict/play/srun-2.sh"
scenario evict 3 $'spare_nodes = 1\nevict_stragglers = true' "${all[@]}"
grep -qx -- '--nodelist=127.0.0.3,127.0.0.4,127.0.0.1' "$work/evict/srun-2.argv" || check_failed "evict: second step's nodes: $(cat "$work/evict/srun-2.argv")"
has evict 1 '.reason == "node_lost" and .cause == "straggler" and .lost_nodes == "127.0.0.2" and .exit_status == 78 and (.detected_by | startswith("evicted, evict: rank 2"))'
has evict 2 '.reason == "completed"'

# losses-limit: an eviction and a hang count against max_node_losses as a dead node does: with
# max_node_losses = 1 and a second spare, the first (an eviction) is recovered in the allocation,
# the second (a hang) ends the attempt and the job is requeued without the hung node.
FAKE_NODES="127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5"
mkdir -p "$work/losses-limit/play"
echo 'started; sleep 0.5; verdict evict 127.0.0.2; exit 78' > "$work/losses-limit/play/srun-1.sh"
echo 'started; sleep 0.5; verdict hang 127.0.0.3; exit 77' > "$work/losses-limit/play/srun-2.sh"
echo 'started; finished' > "$work/losses-limit/play/srun-3.sh"
scenario losses-limit 3 $'spare_nodes = 2\nmax_node_losses = 1\nevict_stragglers = true' \
  127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5
[[ $(cat "$work/losses-limit/srun.count") == 2 ]] ||
  check_failed "losses-limit: $(cat "$work/losses-limit/srun.count") steps ran, not 2"
has losses-limit 1 '.reason == "node_lost" and .cause == "straggler" and .lost_nodes == "127.0.0.2"'
has losses-limit 2 '.reason == "node_lost_requeued" and .cause == "hang" and .lost_nodes == "127.0.0.3" and .added_nodes == ""'
grep -qx 'requeue 4242' "$work/losses-limit/scontrol.calls" || check_failed "losses-limit: not requeued"
FAKE_NODES="127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4"

# failures-chain: a node lost is not the run's fault: a node_lost_requeued attempt breaks the
# chain of consecutive failures (max_consecutive_failures = 2): after [failed, failed, node lost]
# a failing attempt is requeued; after [node lost, failed, failed] it is not.
for name in failures-after-loss failures-before-loss; do
  mkdir -p "$work/$name/play"
  echo 'started; exit 1' > "$work/$name/play/srun-1.sh"
done
failed='{"job_id":"4242","reason":"failed_requeued","last_step":null}'
lost='{"job_id":"4242","reason":"node_lost_requeued","lost_nodes":"fake9","last_step":null}'
printf '%s\n' "$failed" "$failed" "$lost" > "$work/failures-after-loss/attempts.jsonl"
printf '%s\n' "$lost" "$failed" "$failed" > "$work/failures-before-loss/attempts.jsonl"
for name in failures-after-loss failures-before-loss; do
  scenario "$name" 2 $'[preemption]\nmax_consecutive_failures = 2' 127.0.0.1 127.0.0.2
done
has failures-after-loss 4 '.reason == "failed_requeued" and .exit_status == 1'
grep -qx 'requeue 4242' "$work/failures-after-loss/scontrol.calls" 2>/dev/null ||
  check_failed "failures-after-loss: not requeued: $(cat "$work/failures-after-loss/err")"
has failures-before-loss 4 '.reason == "failed" and .exit_status == 1'
grep -q 'requeue' "$work/failures-before-loss/scontrol.calls" 2>/dev/null &&
  check_failed "failures-before-loss: requeued after 3 failures in a row"

# avoid: 127.0.0.2 was lost in this job's first attempt; Slurm gave this one the same nodes.
for name in avoid avoid-short; do
  mkdir -p "$work/$name/play"
  echo '{"job_id":"4242","reason":"node_lost_requeued","lost_nodes":"127.0.0.2","last_step":10}' > "$work/$name/attempts.jsonl"
  echo '{"job_id":"999","reason":"node_lost_requeued","lost_nodes":"127.0.0.3","last_step":null}' >> "$work/$name/attempts.jsonl"
  echo 'started; finished' > "$work/$name/play/srun-1.sh"
done
scenario avoid 3 'spare_nodes = 1' "${all[@]}"
grep -qx -- '--nodelist=127.0.0.3,127.0.0.4,127.0.0.1' "$work/avoid/srun-1.argv" || check_failed "avoid: step's nodes: $(cat "$work/avoid/srun-1.argv")"
has avoid 3 '.reason == "completed" and .avoided == "127.0.0.2"'
grep -q 'not training on 127.0.0.2: lost in an earlier attempt' "$work/avoid/out" || check_failed "avoid: not said: $(cat "$work/avoid/out")"
# avoid-short: no spare: the node is used rather than nothing trains.
scenario avoid-short 4 'on_node_loss = "requeue"' "${all[@]}"
grep -qx -- '--nodelist=127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.1' "$work/avoid-short/srun-1.argv" || check_failed "avoid-short: step's nodes: $(cat "$work/avoid-short/srun-1.argv")"
has avoid-short 3 '.reason == "completed" and .avoided == null'

# gate: 127.0.0.3 has no slurmd from the start.
mkdir -p "$work/gate/play"
echo 'sleep 1; finished' > "$work/gate/play/srun-1.sh"
scenario gate 3 'spare_nodes = 1' 127.0.0.1 127.0.0.2 127.0.0.4
grep -q 'node loss is not watched' "$work/gate/err" || check_failed "gate: no warning: $(cat "$work/gate/err")"
grep -q -- '--nodelist' "$work/gate/srun-1.argv" && check_failed "gate: srun got a node list"
has gate 1 '.reason == "completed"'

# term: scancel during the setup, before any step.
FAKE_NODES="127.0.0.1 127.0.0.2"
mkdir -p "$work/term/play"
echo 'started; finished' > "$work/term/play/srun-1.sh"
TERM_IN_SETUP=1 scenario term 2 '' 127.0.0.1 127.0.0.2
[[ $(cat "$work/term/status") == 143 ]] || check_failed "term: script exited $(cat "$work/term/status"): $(cat "$work/term/err")"
[[ -e $work/term/srun.count ]] && check_failed "term: a step was started after the TERM"
has term 1 '.reason == "terminated" and .exit_status == 143 and .step == 0'
[[ $(wc -l < "$work/term/attempts.jsonl") == 1 ]] || check_failed "term: ledger lines"
# term-early: the TERM comes before the hand-over: the script passes it on.
mkdir -p "$work/term-early/play"
echo 'started; finished' > "$work/term-early/play/srun-1.sh"
TERM_BEFORE_HANDOVER=1 scenario term-early 2 '' 127.0.0.1 127.0.0.2
[[ $(cat "$work/term-early/status") == 143 ]] || check_failed "term-early: script exited $(cat "$work/term-early/status"): $(cat "$work/term-early/err")"
[[ -e $work/term-early/srun.count ]] && check_failed "term-early: a step was started after the TERM"
has term-early 1 '.reason == "terminated" and .exit_status == 143 and .step == 0'

# breaker: four attempts already ended without a checkpoint; a fifth asking to be requeued (75)
# without one is not requeued (max_attempts_without_progress = 5: no_progress). progress: the
# same, but this attempt commits a checkpoint: requeued.
nulls='{"job_id":"4240","reason":"failed_requeued","last_step":null}'
for name in breaker progress; do
  mkdir -p "$work/$name/play"
  printf '%s\n' "$nulls" "$nulls" "$nulls" "$nulls" > "$work/$name/attempts.jsonl"
done
echo 'started; exit 75' > "$work/breaker/play/srun-1.sh"
echo "started; mkdir -p '$work/progress/checkpoints/step-000000010'; : > '$work/progress/checkpoints/step-000000010/manifest.json'; exit 75" \
  > "$work/progress/play/srun-1.sh"
for name in breaker progress; do
  scenario "$name" 2 $'[preemption]\nmax_attempts_without_progress = 5' 127.0.0.1 127.0.0.2
done
has breaker 5 '.reason == "no_progress" and .exit_status == 75 and .last_step == null'
[[ $(cat "$work/breaker/status") == 75 ]] || check_failed "breaker: script exited $(cat "$work/breaker/status")"
grep -q 'requeue' "$work/breaker/scontrol.calls" 2>/dev/null && check_failed "breaker: the job was requeued"
grep -q '5 attempts in a row ended without a new committed checkpoint' "$work/breaker/err" \
  || check_failed "breaker: no reason given: $(cat "$work/breaker/err")"
has progress 5 '.reason == "requeued" and .last_step == 10'
grep -qx 'requeue 4242' "$work/progress/scontrol.calls" || check_failed "progress: not requeued"

# credit: histories in which an attempt did commit a checkpoint (step 10, on disk). The attempt
# that first committed it made progress: only those after it count against the breaker.
#   credit-2-2   [commits 10]; this attempt commits nothing; max 2: one without progress, requeued
#   credit-3-2   [commits 10, nothing]; this attempt nothing; max 2: two in a row, no_progress
#   credit-3-3   the same history, max 3: two in a row, requeued
#   credit-late  [no checkpoint, commits 10, nothing]; this attempt nothing; max 3: requeued
committed='{"job_id":"4240","reason":"requeued","last_step":10}'
declare -A history=([credit-2-2]="$committed" [credit-3-2]="$committed"$'\n'"$committed"
                    [credit-3-3]="$committed"$'\n'"$committed"
                    [credit-late]="$nulls"$'\n'"$committed"$'\n'"$committed")
declare -A most=([credit-2-2]=2 [credit-3-2]=2 [credit-3-3]=3 [credit-late]=3)
for name in credit-2-2 credit-3-2 credit-3-3 credit-late; do
  mkdir -p "$work/$name/play" "$work/$name/checkpoints/step-000000010"
  : > "$work/$name/checkpoints/step-000000010/manifest.json"
  printf '%s\n' "${history[$name]}" > "$work/$name/attempts.jsonl"
  echo 'started; exit 75' > "$work/$name/play/srun-1.sh"
  scenario "$name" 2 "[preemption]"$'\n'"max_attempts_without_progress = ${most[$name]}" 127.0.0.1 127.0.0.2
done
for name in credit-2-2 credit-3-3 credit-late; do
  n=$(wc -l < "$work/$name/attempts.jsonl")
  has "$name" "$n" '.reason == "requeued" and .last_step == 10'
  grep -qx 'requeue 4242' "$work/$name/scontrol.calls" 2>/dev/null ||
    check_failed "$name: not requeued: $(cat "$work/$name/err")"
done
has credit-3-2 3 '.reason == "no_progress" and .exit_status == 75 and .last_step == 10'
grep -q 'requeue' "$work/credit-3-2/scontrol.calls" 2>/dev/null && check_failed "credit-3-2: the job was requeued"
grep -q '2 attempts in a row ended without a new committed checkpoint (newest: 10)' "$work/credit-3-2/err" ||
  check_failed "credit-3-2: no reason given: $(cat "$work/credit-3-2/err")"

finish "node loss: replace, noticed, shrink, fallback, gate; TERM during the setup; the no-progress breaker (an attempt's own checkpoint counted as progress); hang and evict verdicts; exclusion on requeue, avoidance on the next attempt"
