#!/usr/bin/env bash
# Recovery from a node lost inside the allocation (docs/resilience.md), on the namespace cluster
# (scripts/slurm-multinode.sh, 4 nodes: 3 train, 1 spare; a fresh cluster per trial). TRIALS
# trials of each kind, each at a random step:
#   kill  SIGKILL to every process of a training node, its slurmd included;
#   cut   the node's link goes down (no FIN, no RST reaches its peers);
#   hang  both ranks of a training node stall in their data wait after the trial's step, alive
#         (HPCTRAIN_TEST_STALL=@NODE:STEP:data:600; resilience.hang_timeout_s = HANG_S);
#   slow  both ranks of a training node sleep SLOW_S in every data wait from the trial's step on
#         (HPCTRAIN_TEST_STALL=@NODE:STEP+:data:SLOW_S; evict_stragglers, 3 windows of 5 steps).
# Each kind loses rank 0's node in half of its trials and another node in the rest. Per trial of
# kill and cut:
#   stop_s     from the loss to the moment no worker of the old step runs on a healthy node
#              (polled every 0.1 s in the nodes' namespaces; target <= 15 s);
#   restart_s  from then to the first training step of the new step (rank 0's "started" record
#              in metrics.jsonl; target <= 60 s);
#   redone     steps trained again: reached before the loss minus the step resumed from (target:
#              <= one checkpoint interval, every_steps below);
#   and that the run completed in the same job, resumed from a checkpoint no older than the newest
#   one the old step had committed when its survivors stopped (none lost), with final weights
#   bitwise equal to an uninterrupted run's. Per trial of hang and slow:
#   detect_s   from the stall's start (rank 0's train record of the trial's step) to rank 0's
#              verdict (its hang or evict record in metrics.jsonl);
#   restart_s  from the verdict to the first training step of the new step (the hang's includes
#              the named ranks' gdb stacks, which the others wait for);
#   redone     the steps reached before the verdict minus the step resumed from (a hang resumes
#              from the last periodic checkpoint; an eviction from its own, at the verdict);
#   and the same checks (the node replaced by the spare, cause hang or straggler in the ledger).
# Then p50/p95 per kind. Also each run's peak resident memory per rank and the threads per rank.
# The peer, plain PyTorch DDP (gloo) under srun, has no recovery inside the allocation: its
# survivors block in the collective until torch's timeout (30 min by default) and Slurm then ends
# the job; one trial of it, watched for PEER_WAIT_S, gives its stop time (or a lower bound).
#   bench/resilience/run.sh [BUILD_DIR]   (default build; needs hpctrain, hpctrain-worker, root)
# Environment: KINDS ("kill cut hang slow"), TRIALS (10), EVERY (checkpoint every_steps, 10),
# STEPS (max_steps, 150), HANG_S (hang_timeout_s, 10), SLOW_S (0.3),
# BENCH_DIR (/var/tmp/hpctrain-bench-resilience), PEER (1: run the peer trial), PEER_WAIT_S (120),
# PYTHON (python3 with torch). Prints Markdown.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$repo/build}
trials=${TRIALS:-10}
every=${EVERY:-10}
steps=${STEPS:-150}
kinds=${KINDS:-kill cut hang slow}
hang_s=${HANG_S:-10}
slow_s=${SLOW_S:-0.3}
dir=${BENCH_DIR:-/var/tmp/hpctrain-bench-resilience}
mn=$repo/scripts/slurm-multinode.sh
hpctrain=$build/bin/hpctrain
[[ -x $hpctrain && -x $build/bin/hpctrain-worker ]] || { echo "build hpctrain and hpctrain-worker in $build" >&2; exit 2; }
cluster=$dir/cluster
export SLURM_CONF=$cluster/slurm.conf
rm -rf "$dir"
mkdir -p "$dir/bin"
cp "$build/bin/hpctrain-worker" "$dir/bin/"
trap '"$mn" stop "$cluster" >/dev/null 2>&1' EXIT
tag=hmn$(printf '%s' "$(realpath -m "$cluster")" | md5sum | cut -c1-6)
results=$dir/results.txt
: > "$results"

source "$repo/tests/support/synthetic_spec.sh"
die() { echo "bench/resilience: $*" >&2; exit 1; }
fresh_cluster() { "$mn" restart "$cluster" 4 > "$dir/cluster.log" 2>&1 || die "cluster: $(tail "$dir/cluster.log")"; }
now() { date +%s.%N; }

spec() {  # NAME [KEY=VALUE]...: a replace spec; its path
  local name=$1; shift
  synthetic_spec job.name="$name" job.partition=debug job.srun_mpi=pmix job.nodes=3 \
    job.tasks_per_node=2 job.time=00:20:00 job.run_dir="$dir/runs/{name}" \
    job.worker="$dir/bin/hpctrain-worker" data.synthetic_samples=960 data.synthetic_image_size=16 \
    train.epochs=100 train.max_steps="$steps" train.batch_size=8 train.log_every_steps=1 \
    train.threads=1 train.schedule.name=constant checkpoint.every_steps="$every" \
    preemption.signal_lead_s=60 resilience.spare_nodes=1 "$@" > "$dir/$name.toml"
  echo "$dir/$name.toml"
}
step_of() { { jq -r 'select(.kind == "train") | .step' "$1/metrics.jsonl" 2>/dev/null || true; } | tail -n 1; }
finished() { [[ -s $1/attempts.jsonl ]] && tail -n 1 "$1/attempts.jsonl" | jq -e '.reason != "node_lost"' >/dev/null; }
fingerprint() { grep -ho 'final weights fnv1a64 0x[0-9a-f]*' "$1"/logs/*.err | awk '{print $4}' | sort -u; }
committed() {  # newest committed checkpoint step of RUN
  local d best=-1
  for d in "$1"/checkpoints/step-*/; do
    [[ -f ${d}manifest.json ]] || continue
    d=${d%/}; d=$((10#${d##*step-})); (( d > best )) && best=$d
  done
  echo "$best"
}
workers_on() {  # NODE...: hpctrain-worker processes in those nodes' namespaces
  local n
  for n in "$@"; do ip netns pids "$tag-$n" 2>/dev/null; done | xargs -r ps -o comm= -p 2>/dev/null |
    grep -c '^hpctrain-worke' || true
}
wait_until() {  # SECONDS COMMAND...
  local deadline=$(( SECONDS + $1 )); shift
  until "$@"; do (( SECONDS < deadline )) || return 1; sleep 0.1; done
}
reached_at() { local s; s=$(step_of "$1"); (( ${s:-0} >= $2 )); }

# The uninterrupted reference, and the memory and threads of a run.
fresh_cluster
"$hpctrain" submit "$(spec reference)" > /dev/null 2>&1 || die "submit reference"
wait_until 600 finished "$dir/runs/reference" || die "reference run did not end"
reference=$(fingerprint "$dir/runs/reference")
[[ $reference =~ ^0x[0-9a-f]+$ ]] || die "reference fingerprint '$reference'"
rss=$(grep -ho 'peak RSS [0-9]* MiB per rank' "$dir/runs/reference"/logs/*.out | awk '{print $3}' | tail -n 1)

trial() {  # KIND N
  local kind=$1 n=$2 name=$1-$2 run at node r0 step_nodes t_loss t_stop survivors started resumed reached ckpt fp ok=yes
  run=$dir/runs/$name
  fresh_cluster
  at=$(( 15 + RANDOM % (steps - 45) ))
  "$hpctrain" submit "$(spec "$name")" > /dev/null 2>&1 || die "submit $name"
  wait_until 300 reached_at "$run" "$at" || die "$name: step $at never reached"
  r0=$(grep -o '^\[rank 0/[0-9]* node[0-9]*\]' "$run"/logs/*.out | tail -n 1 | sed 's/.* \(node[0-9]*\)\]/\1/')
  mapfile -t step_nodes < <(scontrol show hostnames "$(squeue -h -s -o '%i %N' | awk '$1 ~ /\.0$/ {print $2}')")
  if (( n % 2 )); then node=$r0; else node=$(printf '%s\n' "${step_nodes[@]}" | grep -vx "$r0" | head -n 1); fi
  survivors=()
  local x; for x in "${step_nodes[@]}"; do [[ $x == "$node" ]] || survivors+=("$x"); done
  t_loss=$(now)
  "$mn" "$kind" "$cluster" "$node" || die "$name: $kind $node"
  # The survivors' workers are gone (the old step's: the new one starts later, on them too).
  wait_until 120 bash -c "(( \$(for n in ${survivors[*]}; do ip netns pids $tag-\$n; done | xargs -r ps -o comm= -p 2>/dev/null | grep -c '^hpctrain-worke') == 0 ))" ||
    { echo "$kind $n $at $node hang" >> "$results"; return; }
  t_stop=$(now)
  # Nothing of the old step can commit any more: its newest checkpoint is the one to resume from.
  ckpt=$(committed "$run")
  reached=$(jq -r 'select(.kind == "train") | .step' "$run/metrics.jsonl" | awk '$1 <= p {exit} {p = $1} END {print p}')
  wait_until 600 finished "$run" || { echo "$kind $n $at $node hang" >> "$results"; return; }
  started=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .wall_time' "$run/metrics.jsonl")
  resumed=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .resumed_from' "$run/metrics.jsonl")
  fp=$(fingerprint "$run")
  [[ $(tail -n 1 "$run/attempts.jsonl" | jq -r .reason) == completed ]] || ok="not completed"
  [[ $(jq -r .restart "$run/attempts.jsonl" | sort -u) == 0 ]] || ok="requeued"
  [[ $resumed =~ ^[0-9]+$ ]] && (( resumed >= ckpt )) || ok="resumed from $resumed, newest committed $ckpt"
  [[ $fp == "$reference" ]] || ok="weights $fp"
  awk -v k="$kind" -v n="$n" -v at="$at" -v node="$node" -v r0="$r0" -v l="$t_loss" -v s="$t_stop" \
      -v st="${started:-nan}" -v re="$reached" -v rs="${resumed:-0}" -v ok="$ok" \
    'BEGIN { printf "%s %d %d %s %s %.1f %.1f %d %s\n", k, n, at, node, (node == r0 ? "rank0" : "other"), s - l, st - s, re - rs, ok == "yes" ? "ok" : "FAIL:" ok }' \
    >> "$results"
  "$mn" stop "$cluster" > /dev/null 2>&1
}

# stall_trial KIND N: a planted hang or slowness on a training node (rank 0's, node2, in odd
# trials; node3 in even ones) from a random step; the verdict, the replacement and the checks.
stall_trial() {
  local kind=$1 n=$2 name=$1-$2 run at node stall record t_start t_verdict started resumed reached fp ok=yes
  local -a extra
  run=$dir/runs/$name
  fresh_cluster
  at=$(( 15 + RANDOM % (steps - 45) ))
  if (( n % 2 )); then node=node2; else node=node3; fi  # node1, the batch host, is the spare
  if [[ $kind == hang ]]; then
    stall="@$node:$at:data:600" record=hang extra=(resilience.hang_timeout_s="$hang_s")
  else
    at=$(( at / 5 * 5 ))  # a step with a train record (one every 5 steps)
    stall="@$node:$at+:data:$slow_s" record=evict
    extra=(resilience.evict_stragglers=true resilience.straggler_windows=3 train.log_every_steps=5)
  fi
  HPCTRAIN_TEST_STALL=$stall "$hpctrain" submit "$(spec "$name" "${extra[@]}")" > /dev/null 2>&1 ||
    die "submit $name"
  wait_until 900 finished "$run" || { echo "$kind $n $at $node hang" >> "$results"; return; }
  t_start=$(jq -r --argjson s "$at" 'select(.kind == "train" and .step == $s) | .wall_time' "$run/metrics.jsonl" | head -n 1)
  t_verdict=$(jq -r --arg k "$record" 'select(.kind == $k) | .wall_time' "$run/metrics.jsonl" | head -n 1)
  reached=$(jq -r --arg k "$record" 'select(.kind == $k) | .step' "$run/metrics.jsonl" | head -n 1)
  started=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .wall_time' "$run/metrics.jsonl")
  resumed=$(jq -r 'select(.kind == "started" and .tag == "0.1") | .resumed_from' "$run/metrics.jsonl")
  fp=$(fingerprint "$run")
  [[ $(tail -n 1 "$run/attempts.jsonl" | jq -r .reason) == completed ]] || ok="not completed"
  [[ $(jq -r .restart "$run/attempts.jsonl" | sort -u) == 0 ]] || ok="requeued"
  head -n 1 "$run/attempts.jsonl" | jq -e --arg node "$node" --arg c "${record/evict/straggler}" \
    '.reason == "node_lost" and .lost_nodes == $node and .cause == $c and .added_nodes == "node1"' > /dev/null ||
    ok="ledger: $(head -n 1 "$run/attempts.jsonl" | jq -c '{reason, lost_nodes, cause}')"
  [[ $t_start && $t_verdict && $resumed =~ ^[0-9]+$ ]] || ok="no verdict or no resume"
  [[ $fp == "$reference" ]] || ok="weights $fp"
  awk -v k="$kind" -v n="$n" -v at="$at" -v node="$node" -v a="${t_start:-0}" -v v="${t_verdict:-0}" \
      -v st="${started:-0}" -v re="${reached:-0}" -v rs="${resumed:-0}" -v ok="$ok" \
    'BEGIN { printf "%s %d %d %s %s %.1f %.1f %d %s\n", k, n, at, node, (node == "node2" ? "rank0" : "other"), v - a, st - v, re - rs, ok == "yes" ? "ok" : "FAIL:" ok }' \
    >> "$results"
  "$mn" stop "$cluster" > /dev/null 2>&1
}

# The peer: 3 nodes, no spare, no --no-kill (as a DDP user submits it); node2 lost at step 40.
declare -A peer_stop=([kill]=skipped [cut]=skipped) peer_after=([kill]=? [cut]=?)
peer_rss=?
peer_trial() {  # KIND
  local kind=$1 python=${PYTHON:-$repo/.venv/bin/python3} id t_loss waited=${PEER_WAIT_S:-120} pid
  fresh_cluster
  cat > "$dir/peer-$kind.sbatch" <<SH
#!/bin/bash
#SBATCH -N3 --ntasks-per-node=2 --cpus-per-task=1 -t 20 -o $dir/peer-$kind.out -e $dir/peer-$kind.err
export MASTER_ADDR=\$(scontrol show hostnames "\$SLURM_JOB_NODELIST" | head -n 1) MASTER_PORT=29512
srun --kill-on-bad-exit=1 $python $repo/bench/resilience/peer_ddp.py
SH
  id=$(sbatch --parsable "$dir/peer-$kind.sbatch") || die "peer: sbatch"
  wait_until 300 grep -qs '^step 40 ' "$dir/peer-$kind.out" || die "peer: no step 40: $(tail -n 5 "$dir/peer-$kind.err")"
  pid=$(ip netns pids "$tag-node3" | xargs -r ps -o pid=,comm= -p | awk '$2 ~ /^python/ {print $1; exit}')
  peer_rss=$(awk '/^VmHWM/ {printf "%d", $2 / 1024}' "/proc/$pid/status" 2>/dev/null)
  t_loss=$(now)
  "$mn" "$kind" "$cluster" node2 || die "peer: $kind node2"
  if wait_until "$waited" bash -c "(( \$(for n in node1 node3; do ip netns pids $tag-\$n; done | xargs -r ps -o comm= -p 2>/dev/null | grep -c '^python') == 0 ))"; then
    peer_stop[$kind]=$(awk -v a="$t_loss" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  else
    peer_stop[$kind]="> $waited (still waiting)"
  fi
  peer_after[$kind]=$(grep -c '^step ' "$dir/peer-$kind.out")
  scancel "$id" 2>/dev/null
  "$mn" stop "$cluster" > /dev/null 2>&1
}
if [[ ${PEER:-1} == 1 && " $kinds " == *" kill "* ]]; then
  peer_trial kill
  peer_trial cut
fi

for kind in $kinds; do
  for n in $(seq 1 "$trials"); do
    case $kind in
      kill | cut) trial "$kind" "$n" ;;
      hang | slow) stall_trial "$kind" "$n" ;;
      *) die "unknown kind $kind (kill, cut, hang, slow)" ;;
    esac
  done
done

echo "## Node loss recovery ($(date -u +%Y-%m-%d), $(nproc) cores, $trials trials each)"
echo
echo "4-node namespace cluster (3 train + 1 spare), 2 ranks per node x 1 thread, CIFAR ResNet-20 on"
echo "synthetic 16x16 images, batch 8 per rank, checkpoint every $every steps, heartbeat timeout 10 s."
echo "Peak resident memory per rank: ours ${rss:-?} MiB (the uninterrupted run's largest), the peer's"
echo "${peer_rss:-?} MiB (VmHWM of one rank at the loss). Threads: 1 intra-op thread per rank on both sides."
echo
echo "Peer (PyTorch DDP, gloo, under srun, 3 nodes without a spare), node2 lost at step 40: killed,"
echo "its survivors stopped after ${peer_stop[kill]} s (rank 0 printed ${peer_after[kill]} steps); cut, after"
echo "${peer_stop[cut]} s (${peer_after[cut]} steps). The cluster's SlurmdTimeout is 60 s (Slurm's default 300 s),"
echo "torch's collective timeout 30 min. The peer has no recovery inside the allocation: its job"
echo "ends, and a requeue waits in the queue."
echo
echo "For hang and slow, \"stop s\" is detect s: from the stall's start to rank 0's verdict (hang"
echo "timeout $hang_s s; a slowdown of $slow_s s a step, evicted after 3 windows of 5 steps), and"
echo "\"restart s\" runs from the verdict."
echo
echo "| kind | trial | step | node | whose | stop (detect) s | restart s | steps redone | checks |"
echo "|---|---|---|---|---|---|---|---|---|"
awk '{ printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }' "$results"
echo
echo "| kind | stop (detect) s p50 | p95 | restart s p50 | restart s p95 | redone p50 | redone max | failed checks or hangs |"
echo "|---|---|---|---|---|---|---|---|"
# pct COLUMN P: the P-th percentile (nearest rank) of COLUMN over the rows on stdin.
pct() { awk -v c="$1" '{print $c}' | sort -g | awk -v p="$2" '{v[NR] = $1} END {i = int(p * (NR - 1) + 0.5) + 1; print v[i]}'; }
for kind in $kinds; do
  rows=$(awk -v k="$kind" '$1 == k && NF == 9' "$results")
  bad=$(awk -v k="$kind" '$1 == k && (NF != 9 || $9 != "ok")' "$results" | wc -l)
  echo "| $kind | $(pct 6 .5 <<<"$rows") | $(pct 6 .95 <<<"$rows") | $(pct 7 .5 <<<"$rows") |" \
       "$(pct 7 .95 <<<"$rows") | $(pct 8 .5 <<<"$rows") | $(pct 8 1 <<<"$rows") | $bad |"
done
