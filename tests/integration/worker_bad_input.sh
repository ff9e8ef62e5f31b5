#!/usr/bin/env bash
# Bad input reaches the user as one actionable line from the worker: a damaged dataset file is
# reported by the data library with the worker's "[rank r/N host] file.cpp:line:" prefix, naming
# the file, and the worker exits 2 (bad input); a malformed launch environment likewise; a
# tensorboard/ folder that cannot be made stops the run at the start, naming it.
#   worker_bad_input.sh WORKER
set -uo pipefail
worker=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../support/fail.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../support/synthetic_spec.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../support/port.sh"

head -c 4096 /dev/urandom > "$dir/damaged.h5"
cat > "$dir/spec.toml" <<SPEC
[job]
name = "bad-input"
run_dir = "$dir/run"
[data]
train = "$dir/damaged.h5"
SPEC

out=$(env -u SLURM_JOB_ID "$worker" --spec "$dir/spec.toml" 2>&1)
status=$?
echo "$out"
[[ $status == 2 ]] || fail "damaged dataset: exit status $status, want 2"
grep -Eq "^\[rank 0/1 $(hostname)\] [a-z_0-9]+\.cpp:[0-9]+: .*$dir/damaged.h5" <<<"$out" \
  || fail "no '[rank 0/1 $(hostname)] file.cpp:line: ... damaged.h5' line"

out=$(env SLURM_JOB_ID=1 SLURM_STEP_ID=0 SLURM_NTASKS=2 SLURM_PROCID=x "$worker" --spec "$dir/spec.toml" 2>&1)
status=$?
echo "$out"
[[ $status == 2 ]] || fail "bad environment: exit status $status, want 2"
grep -Eq "^\[$(hostname)\] world\.cpp:[0-9]+: .*SLURM_PROCID" <<<"$out" \
  || fail "no '[host] world.cpp:line: ... SLURM_PROCID' line"
# A run directory whose tensorboard/ cannot be made: the worker stops at the start, naming it
# (as for metrics.jsonl).
small=(data.synthetic_samples=64 data.synthetic_image_size=16 train.epochs=1 train.batch_size=16
       train.threads=1)
synthetic_spec job.name=bad-tensorboard job.run_dir="$dir/tb-run" "${small[@]}" > "$dir/tb.toml"
mkdir -p "$dir/tb-run" && touch "$dir/tb-run/tensorboard"
out=$(env -u SLURM_JOB_ID "$worker" --spec "$dir/tb.toml" 2>&1)
status=$?
echo "$out"
[[ $status != 0 ]] || fail "tensorboard/ not a folder: exit status 0"
grep -Eq "^\[rank 0/1 $(hostname)\] event_file\.cpp:[0-9]+: cannot create $dir/tb-run/tensorboard" <<<"$out" \
  || fail "no '[rank 0/1 $(hostname)] event_file.cpp:line: cannot create .../tensorboard' line"
grep -q "step 1/" <<<"$out" && fail "trained without its tensorboard/ folder"

# A GPU job on a rank without a usable GPU (this machine; or a CPU build) is an error naming the
# rank, the host, what the driver and CUDA say and the driver the build needs: never a silent
# training run on the CPU.
synthetic_spec job.name=gpu-without-gpu job.gpus_per_node=1 job.run_dir="$dir/gpu-run" \
  "${small[@]}" > "$dir/gpu.toml"
describe=$(env -u SLURM_JOB_ID "$worker" --spec "$dir/gpu.toml" --describe-env 2>&1)
echo "$describe"
if [[ $(jq -r .backend <<<"$describe") == nccl ]]; then
  echo "this machine has a usable GPU: the no-GPU case is not reachable here"
else
  jq -e '.cuda_problem | test("driver")' <<<"$describe" >/dev/null \
    || fail "--describe-env of a GPU spec without CUDA has no cuda_problem naming the driver"
  out=$(env -u SLURM_JOB_ID "$worker" --spec "$dir/gpu.toml" 2>&1)
  status=$?
  echo "$out"
  [[ $status == 1 ]] || fail "GPU spec without CUDA: exit status $status, want 1"
  grep -q "job.gpus_per_node = 1) but rank 0 of 1 on $(hostname) cannot use CUDA: .*driver" <<<"$out" \
    || fail "no line naming gpus_per_node, the rank, the host and the driver"
  grep -q "minimum driver\|needs driver\|driver >=" <<<"$out" || fail "the minimum driver is not named"
  grep -q "never trains a GPU job on the CPU" <<<"$out" || fail "no statement that it refuses"
  grep -q "^\[rank 0/1 $(hostname)\] epoch\|training resnet" <<<"$out" && fail "it trained anyway"
  [[ ! -e $dir/gpu-run/metrics.jsonl ]] || fail "it trained anyway (metrics.jsonl written)"
fi
# Open files: the soft limit is raised to the hard one (rank 0 of a large job serves ~3 store
# connections per rank); when even the hard limit is short, rank 0 says so before it joins. 2
# ranks of the self test under a soft limit of 20 (too few for the rendezvous alone) and a hard
# one of 4096 pass; under a hard limit of 60 rank 0 warns (2 ranks ask for 3 x 2 + 64 = 70).
selftest_pair() {  # selftest_pair SOFT HARD: 2 self-test ranks under those open-file limits; rank 0's output in $dir/st0
  local port pid
  reserve_port port || fail "no port for the self test"
  (ulimit -Sn "$1" && ulimit -Hn "$2" || exit 9; RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
     MASTER_PORT=$port env -u SLURM_JOB_ID "$worker" --selftest --selftest-max-bytes 8 > "$dir/st1" 2>&1) &
  pid=$!
  (ulimit -Sn "$1" && ulimit -Hn "$2" || exit 9; RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
     MASTER_PORT=$port env -u SLURM_JOB_ID "$worker" --selftest --selftest-max-bytes 8 > "$dir/st0" 2>&1)
  local status=$?
  wait "$pid" || status=1
  return "$status"
}
selftest_pair 20 4096 || fail "self test under a soft limit of 20 open files: $(cat "$dir/st0" "$dir/st1")"
! grep -q 'open files limited' "$dir/st0" || fail "a warning with a hard limit of 4096: $(cat "$dir/st0")"
selftest_pair 60 60
grep -q 'warning: open files limited to 60 (ulimit -n, hard limit too); rank 0 of 2 ranks needs about 69' "$dir/st0" ||
  fail "no warning under a hard limit of 60: $(cat "$dir/st0")"
# Below what joining needs (2 per rank + 18 on rank 0: 22), rank 0 refuses at once, naming the
# limit (exit 2), instead of dying inside Gloo; rank 1 (a pair per peer and a few: 10) waits for a
# store that never comes and is ended here.
reserve_port port || fail "no port for the self test"
(ulimit -Sn 20 && ulimit -Hn 20; RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
   MASTER_PORT=$port env -u SLURM_JOB_ID exec "$worker" --selftest --selftest-max-bytes 8 > "$dir/st1" 2>&1) &
other=$!
out=$(ulimit -Sn 20 && ulimit -Hn 20; RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port env -u SLURM_JOB_ID "$worker" --selftest --selftest-max-bytes 8 2>&1)
status=$?
kill "$other" 2>/dev/null
wait "$other" 2>/dev/null
[[ $status == 2 ]] || fail "hard limit of 20 open files: rank 0 exited $status, want 2: $out"
grep -Eq "^\[rank 0/2 $(hostname)\] run\.cpp:[0-9]+: open files are limited to 20 \(ulimit -n, the hard limit too\) and rank 0 of 2 ranks needs at least 22 to join" <<<"$out" ||
  fail "no line naming the limit and what rank 0 needs: $out"
# A rank whose rank 0 never listens (it died before, or its port was taken) stops at its own
# rendezvous deadline, naming rank 0's address: c10d's connect alone tries twice, each for the
# whole timeout (1,200 s for the default 600).
synthetic_spec job.name=no-rank0 job.tasks_per_node=2 job.run_dir="$dir/no-rank0" \
  train.rendezvous_timeout_s=15 "${small[@]}" > "$dir/no-rank0.toml"
reserve_port free || fail "no free port"
started=$SECONDS
out=$(RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$free \
        env -u SLURM_JOB_ID timeout 120 "$worker" --spec "$dir/no-rank0.toml" 2>&1)
status=$?
took=$((SECONDS - started))
echo "no rank 0: exit $status after $took s (rendezvous_timeout_s = 15)"
[[ $status != 0 && $status != 124 ]] || fail "no rank 0: exit status $status"
grep -Eq "^\[rank 1/2 $(hostname)\] process_group\.cpp:[0-9]+: cannot reach the rendezvous store of rank 0 at 127\.0\.0\.1:$free within 15 s" <<<"$out" \
  || fail "no line naming rank 0's address and the deadline: $out"
# The deadline and process start-up (a few seconds; more on a loaded machine), not twice it.
(( took < 28 )) || fail "no rank 0: the rank took $took s to give up, its deadline is 15 s"
# Two jobs on one port (two torchrun jobs given one MASTER_PORT, or a collision of Slurm's derived
# ports): the second job's rank 0 cannot listen, and its rank 1, which reaches the first job's
# store, is refused before it writes there; the first job trains to its end untouched.
for job in a b; do
  synthetic_spec job.name="job-$job" job.tasks_per_node=2 job.run_dir="$dir/job-$job" \
    train.rendezvous_timeout_s=60 "${small[@]}" > "$dir/job-$job.toml"
done
reserve_port shared || fail "no free port"
rank() {  # rank JOB R: that job's rank R in the background on the shared port, its log in $dir/JOB.R
  RANK=$2 WORLD_SIZE=2 LOCAL_RANK=$2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$shared \
    env -u SLURM_JOB_ID timeout 120 "$worker" --spec "$dir/job-$1.toml" > "$dir/$1.$2" 2>&1 &
}
rank a 0
a0=$!
deadline=$((SECONDS + 60))
until ss -Htln "sport = :$shared" | grep -q .; do
  ((SECONDS < deadline)) || fail "job a's rank 0 did not listen on $shared within 60 s: $(cat "$dir/a.0")"
  sleep 0.1
done
rank b 0
b0=$!
rank b 1
b1=$!
wait "$b0"; b0_status=$?
wait "$b1"; b1_status=$?
echo "job b on job a's port: rank 0 exit $b0_status, rank 1 exit $b1_status"
cat "$dir/b.0" "$dir/b.1"
[[ $b0_status == 1 ]] || fail "job b's rank 0 exited $b0_status, want 1"
grep -q "rank 0 cannot listen for the rendezvous on .*:$shared (MASTER_PORT): port $shared is taken" "$dir/b.0" \
  || fail "job b's rank 0 did not say its port is taken"
[[ $b1_status == 1 ]] || fail "job b's rank 1 exited $b1_status, want 1"
grep -Eq "^\[rank 1/2 $(hostname)\] store_join\.cpp:[0-9]+: the rendezvous store at 127\.0\.0\.1:$shared serves another job \(run directory $dir/job-a, 2 ranks\), not this rank's \(run directory $dir/job-b, 2 ranks\): .*set MASTER_PORT to a free port\. This rank wrote nothing there" "$dir/b.1" \
  || fail "job b's rank 1 did not refuse job a's store"
rank a 1
a1=$!
wait "$a0"; a0_status=$?
wait "$a1"; a1_status=$?
[[ "$a0_status $a1_status" == "0 0" ]] || fail "job a, after job b's ranks tried its port, exited '$a0_status $a1_status': $(tail -n 5 "$dir/a.0" "$dir/a.1")"
grep -q "final weights fnv1a64" "$dir/a.0" || fail "job a did not train to its end: $(tail -n 5 "$dir/a.0")"
echo "worker bad-input checks passed"
