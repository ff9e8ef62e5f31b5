#!/usr/bin/env bash
# hpctrain --host against the real cluster, the login node being this machine behind a real sshd
# on loopback (tests/support/sshd.sh): submit over ssh prints sbatch's job id, logs -f over ssh
# follows the job from before it starts to its end (the log byte for byte), status over ssh says
# COMPLETED, and cancel over ssh ends a running job.
source "$(dirname "$0")/lib.sh"
source "$here/../support/sshd.sh"
trap 'stop_sshd; cleanup' EXIT
fail_context() { sshd_log; }

mkdir -p "$work/bin"
ln -s "$HPCTRAIN" "$work/bin/hpctrain"
start_sshd "$work" PATH="$work/bin:/usr/local/bin:/usr/bin:/bin" SLURM_CONF="$SLURM_CONF"
export HPCTRAIN_SSH=$work/ssh
unset HPCTRAIN_HOST
remote() { "$HPCTRAIN" --host remote-test "$@"; }

spec=$(write_spec remote wait-for-go)
id=$(remote submit "$spec") || fail "submit over ssh failed"
[[ $id =~ ^[0-9]+$ ]] || fail "submit over ssh printed '$id', not a job id"
submitted+=("$id")
run=$work/remote
remote logs -f "$run" > "$work/follow.out" 2> "$work/follow.err" &
follow=$!
wait_state "$run" RUNNING 60
for rank in 0 1; do
  wait_for 60 "rank $rank started" test -e "$run/payload-rank$rank-restart0"
done
touch "$run/go"
wait_for 120 "logs -f over ssh to end with the job" bash -c "! kill -0 $follow 2>/dev/null"
wait "$follow" || fail "logs -f over ssh exited $?: $(cat "$work/follow.err")"
got=$(remote status --json "$run" | jq -r '.slurm[0].state')
[[ $got == COMPLETED ]] || fail "status over ssh says '$got', not COMPLETED"
cmp -s "$work/follow.out" "$run/logs/slurm-$id.out" ||
  fail "logs -f over ssh printed other than $run/logs/slurm-$id.out: $(cat "$work/follow.out")"
# The transcript, for a reader of the test's output.
echo "\$ hpctrain --host remote-test submit $spec"
echo "$id"
echo "\$ hpctrain --host remote-test logs -f $run"
cat "$work/follow.out" "$work/follow.err"
echo "\$ hpctrain --host remote-test status --json $run | jq -r '.slurm[0].state'"
echo "$got"

spec=$(write_spec remote-cancel wait-for-go)
id=$(remote submit "$spec") || fail "submit over ssh failed"
submitted+=("$id")
run=$work/remote-cancel
wait_state "$run" RUNNING 60
out=$(remote cancel "$run" 2>&1) || fail "cancel over ssh exited $?: $out"
[[ $out == "cancelled job $id" ]] || fail "cancel over ssh said: $out"
wait_state "$run" CANCELLED 60
echo "ok"
