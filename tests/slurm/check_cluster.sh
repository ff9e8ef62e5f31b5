#!/usr/bin/env bash
# hpctrain check against the real cluster: a spec that fits is ok; GPUs on a partition without
# any, a partition that does not exist and a time above the partition's MaxTime are errors naming
# the key; --offline skips the cluster; with no controller, check says so in one line and passes;
# with accounting off, a job.account is reported as not checked.
source "$(dirname "$0")/lib.sh"

# A partition with a 5-minute limit on the cluster's node, removed at the end.
short=hpctrainshort$$
scontrol create "PartitionName=$short" Nodes=ALL MaxTime=00:05:00 State=UP || fail "scontrol create PartitionName=$short failed"
trap 'scontrol delete "PartitionName=$short" 2>/dev/null; cleanup' EXIT

spec=$(write_spec fits ok)  # time 00:10:00, 2 ranks on the default partition
# check_says STATUS PATTERN ARGS...: hpctrain check ARGS exits STATUS and prints PATTERN.
check_says() {
  local want=$1 pattern=$2 out status; shift 2
  out=$("$HPCTRAIN" check "$@" 2>&1); status=$?
  [[ $status == "$want" ]] || fail "check $* exited $status, not $want: $out"
  [[ $out =~ $pattern ]] || fail "check $*: no /$pattern/ in: $out"
  echo "$out"
}

out=$(check_says 0 "fits.toml: ok" "$spec") || exit 1
[[ $out == *"not checked"* ]] && fail "a fitting spec, with Slurm answering: $out"
check_says 2 "error: \[job\.gpus_per_node\] 4 GPUs per node, but the nodes of partition 'debug'.* have no GPU" \
  "$spec" --set job.gpus_per_node=4 --set job.tasks_per_node=4 > /dev/null
check_says 2 "error: \[job\.partition\] partition 'nope' does not exist on this cluster \(sinfo lists: .*debug" \
  "$spec" --set job.partition=nope > /dev/null
check_says 2 "error: \[job\.time\] '00:10:00' is above the time limit of partition '$short', 00:05:00 \(MaxTime\)" \
  "$spec" --set "job.partition=$short" > /dev/null
check_says 0 "fits.toml: ok" "$spec" --set "job.partition=$short" --set job.time=00:05:00 > /dev/null
# --offline: the spec alone.
out=$(check_says 0 "fits.toml: ok" "$spec" --offline --set job.partition=nope --set job.gpus_per_node=4 \
  --set job.tasks_per_node=4) || exit 1
[[ $out == *"Slurm"* ]] && fail "--offline asked Slurm: $out"
# Accounting is off on this cluster: job.account is not checked, and that is said.
check_says 0 "job\.account not checked: sacctmgr said: .*accounting_storage" "$spec" --set job.account=physics > /dev/null
# No controller: one line saying so, and the spec's own verdict (ok).
out=$(export SLURM_CONF=$work/nothing.conf; check_says 0 "fits.toml: ok" "$spec" --set job.partition=nope) ||
  exit 1
[[ $(grep -c "not checked against Slurm: no Slurm controller was reachable" <<< "$out") == 1 ]] ||
  fail "without a controller: $out"
echo "ok"
