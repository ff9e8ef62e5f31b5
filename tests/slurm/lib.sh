# Shared by the Slurm tests: a scratch directory on /var/tmp (the stand-in for the shared
# filesystem), specs whose worker is payload.sh, submission and waiting with deadlines.
# Needs HPCTRAIN (the launcher) and SLURM_CONF (the test cluster, started by the ctest fixture).
set -uo pipefail
: "${HPCTRAIN:?set HPCTRAIN to the hpctrain executable}"
: "${SLURM_CONF:?set SLURM_CONF to the test cluster (scripts/slurm-local.sh start DIR)}"
export SLURM_CONF
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
payload=$here/payload.sh
work=$(mktemp -d /var/tmp/hpctrain-slurm-test.XXXXXX)
submitted=()

cleanup() {
  local id
  for id in "${submitted[@]}"; do scancel "$id" 2>/dev/null || true; done
  if [[ ${KEEP_WORK:-0} == 1 ]]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

source "$here/../support/fail.sh"
# What fail prints after its message: the end of every run's logs and ledger.
fail_context() {
  local f
  for f in "$work"/*/logs/* "$work"/*/*/logs/* "$work"/*/attempts.jsonl; do
    [[ -f $f ]] && { echo "--- $f"; tail -n 20 "$f"; }
  done
}

# write_spec NAME MODE [EXTRA_TOML]: a spec for payload.sh in $work/NAME.toml; prints its path.
write_spec() {
  local name=$1 mode=$2 extra=${3:-}
  cat > "$work/$name.toml" <<TOML
[job]
name = "$name"
profile = "local"
tasks_per_node = 2
time = "00:10:00"
run_dir = "$work/{name}"
worker = "$payload"
[job.env]
PAYLOAD_MODE = "$mode"
[data]
synthetic = true
[preemption]
signal_lead_s = 60
$extra
TOML
  echo "$work/$name.toml"
}

# submit SPEC [ARGS...]: hpctrain submit; prints the job id.
submit() {
  local id
  id=$("$HPCTRAIN" submit "$@") || fail "hpctrain submit $* failed"
  [[ $id =~ ^[0-9]+$ ]] || fail "submit printed '$id', not a job id"
  submitted+=("$id")
  echo "$id"
}

# state RUN_DIR [N]: the Slurm state of the run's job (of its N-th array task), via hpctrain status.
state() {
  "$HPCTRAIN" status --json "$1" | jq -r ".slurm[${2:-0}].state // \"NONE\""
}

# wait_state RUN_DIR STATE SECONDS [N]: until hpctrain status reports STATE.
wait_state() {
  local dir=$1 want=$2 seconds=$3 n=${4:-0} got=
  local deadline=$((SECONDS + seconds))
  while (( SECONDS < deadline )); do
    got=$(state "$dir" "$n")
    [[ $got == "$want" ]] && return 0
    sleep 0.5
  done
  fail "$dir: state '$got' after ${seconds}s, expected $want"
}

# wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds.
wait_for() {
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    (( SECONDS < deadline )) || fail "no $what within ${seconds}s"
    sleep 0.5
  done
}

# ledger_field RUN_DIR LINE FIELD: a field of the attempts ledger's LINE-th line (1-based).
ledger_field() {
  sed -n "${2}p" "$1/attempts.jsonl" | jq -r ".$3"
}

# goodput_adds_up RUN: the goodput ledger of hpctrain status --json (docs/run-directory.md#goodput)
# has every part, the parts sum to its wall_s within 1%, and wall_s is the time from the first
# submission to the ledger's last end, within 1% (the ledger's times are whole seconds); prints
# the goodput line of hpctrain status and the sum.
goodput_adds_up() {
  local run=$1 json line
  json=$("$HPCTRAIN" status --json "$run") || fail "status --json $run"
  jq -e --slurpfile sub "$run/submissions.jsonl" --slurpfile ledger "$run/attempts.jsonl" '
    def magnitude: if . < 0 then -. else . end;
    .goodput as $g
    | ["queue_wait_s", "startup_s", "training_s", "evaluation_s", "checkpoint_stall_s",
       "work_lost_s", "recovery_s", "idle_end_s"] as $keys
    | ($keys | map($g[.] | type == "number" and . >= 0) | all)
      and $g.wall_s > 0
      and (([$keys[] | $g[.]] | add) - $g.wall_s | magnitude) <= 0.01 * $g.wall_s
      and ((($ledger | map(.end | fromdateiso8601) | max)
            - ($sub[0].submitted_at | fromdateiso8601)) - $g.wall_s | magnitude)
          <= 0.01 * $g.wall_s
      and ($g.ongoing | not)' <<<"$json" > /dev/null ||
    fail "$run: the goodput parts do not add up to the wall time: $(jq -c .goodput <<<"$json")"
  line=$("$HPCTRAIN" status "$run" | grep -E '^goodput [0-9.]+%: training ') ||
    fail "$run: status has no goodput line"
  echo "$line"
  jq -r '.goodput | "goodput: wall \(.wall_s) s, parts \([.queue_wait_s, .startup_s, .training_s,
    .evaluation_s, .checkpoint_stall_s, .work_lost_s, .recovery_s, .idle_end_s] | add) s"' <<<"$json"
}
