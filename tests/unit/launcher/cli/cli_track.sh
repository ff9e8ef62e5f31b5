#!/usr/bin/env bash
# hpctrain track against a real MLflow tracking server (tests/support/mlflow.sh) with a run
# directory as the worker and the step supervisor leave it (spec.toml with [tracking], the
# ledger, metrics.jsonl with a resumed attempt's repeated steps, a quoted experiment name):
#   - the server down: exit 1 naming the URL, the failure kept in tracking.json and shown by
#     hpctrain status, nothing lost;
#   - the server up: one MLflow run created, every step of metrics.jsonl once with its first
#     record's value, the spec as params, the ledger as tags, the report page as an artifact
#     (tests/support/mlflow_check.py reads it back with MLflow's own client);
#   - the step supervisor pushes after an attempt (srun a failing stand-in, no controller);
#   - the run goes on (a last attempt, completed): only the new steps sent, status FINISHED;
#   - a third push sends nothing; a lost tracking.json finds the same MLflow run by its tag;
#   - the server restarted on an empty store: a new run takes the lost one's place, whole;
#   - --follow of an ended run returns after one push; a spec without [tracking] is refused (2).
#   cli_track.sh HPCTRAIN PYTHON
set -uo pipefail
hpctrain=$1 python=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../../support/expect.sh"
source "$here/../../../support/mlflow.sh"
check="$python $here/../../../support/mlflow_check.py"

tmp=$(mktemp -d /var/tmp/hpctrain-track.XXXXXX)
cleanup() {
  stop_mlflow
  rm -rf "$tmp"
}
trap cleanup EXIT
fail_context() { mlflow_log; }

reserve_port port || fail "no port for the mlflow server"
uri=http://127.0.0.1:$port
experiment="cli track's \"quoted\" experiment"
run=$tmp/run
mkdir -p "$run"
cat > "$run/spec.toml" <<TOML
[job]
name = "track"
run_dir = "$run"
[data]
synthetic = true
[tracking]
mlflow_uri = "$uri"
experiment = "cli track's \"quoted\" experiment"
TOML
echo '{"job_id":"41","submitted_at":"2026-11-28T09:00:00Z","array_tasks":0}' > "$run/submissions.jsonl"
train() {  # train STEP LOSS IMAGES_PER_S WALL
  printf '{"kind":"train","step":%s,"epoch":1,"loss":%s,"lr":0.1,"images_per_s":%s,"loss_scale":1.0,"window_first_step":1,"window_seconds":1.0,"wall_time":%s}\n' "$@"
}
evaluated() {  # evaluated STEP TOP1 WALL
  printf '{"kind":"eval","step":%s,"epoch":1,"loss":0.5,"top1":%s,"top5":0.99,"samples":100,"seconds":1.0,"wall_time":%s}\n' "$@"
}
{
  echo '{"kind":"started","step":1,"epoch":1,"world_size":2,"resumed_from":null,"wall_time":1795900000.0}'
  train 4 2.25 100.5 1795900004.0
  train 8 1.5 110 1795900008.0
  train 12 null 120 1795900012.0
  # The second attempt resumed from the checkpoint of step 4: steps 8 and 12 again.
  echo '{"kind":"started","step":5,"epoch":1,"world_size":2,"resumed_from":4,"wall_time":1795900100.0}'
  train 8 1.5 90 1795900108.0
  train 12 null 95 1795900112.0
  train 16 1.0 99 1795900116.0
  evaluated 16 0.75 1795900117.0
} > "$run/metrics.jsonl"
echo '{"job_id":"41","array_task_id":null,"restart":0,"nodes":"n1","start":"2026-11-28T09:00:05Z","end":"2026-11-28T09:01:00Z","exit_status":75,"reason":"requeued","cause":"preempted","last_step":4}' > "$run/attempts.jsonl"

# 1. The server is down.
expect 1 "hpctrain track: $run: .*127.0.0.1:$port.*(onnect|refused)" "$hpctrain" track "$run" --timeout 20
[[ $(jq -r .error "$run/tracking.json" 2>/dev/null) == *"127.0.0.1:$port"* ]] ||
  check_failed "tracking.json does not keep the failed push: $(cat "$run/tracking.json" 2>&1)"
expect 0 "tracking: +no MLflow run yet at $uri; the last push failed at" \
  env PATH=/usr/bin:/bin "$hpctrain" status "$run"

# 2. The server is up: the whole run goes.
start_mlflow "$python" "$tmp/mlflow" "$port"
expect 0 "mlflow run [0-9a-f]+ \(new\) in experiment [0-9]+ at $uri: 19 metric values sent, through step 16, RUNNING, report uploaded" \
  "$hpctrain" track "$run"
run_id=$(jq -r .run_id "$run/tracking.json")
$check "$uri" "$experiment" "$run" --status RUNNING > "$tmp/dump1.json" || check_failed "after the first push"
[[ $(jq -r '.metrics["train.images_per_s"][1][1]' "$tmp/dump1.json") == 110 ]] ||
  check_failed "step 8's throughput is not its first record's: $(jq -c '.metrics["train.images_per_s"]' "$tmp/dump1.json")"
# (mlflow_check compared it as NaN; its JSON dump writes NaN, which jq reads as null.)
[[ $(jq -r '.metrics["train.loss"][2][1]' "$tmp/dump1.json") == null ]] ||
  check_failed "a null loss did not arrive as NaN: $(jq -c '.metrics["train.loss"]' "$tmp/dump1.json")"
[[ $(jq -r '.tags["hpctrain.job_ids"]' "$tmp/dump1.json") == 41 ]] || check_failed "job ids tag"
[[ $(jq -r '.params["tracking.experiment"]' "$tmp/dump1.json") == "$experiment" ]] ||
  check_failed "the experiment param: $(jq -c .params "$tmp/dump1.json")"
expect 0 "tracking: +mlflow run $run_id \(experiment $experiment\) at $uri, through step 16, RUNNING \(pushed " \
  env PATH=/usr/bin:/bin "$hpctrain" status "$run"

# 2b. The step supervisor pushes after an attempt: one whose srun fails at once (a stand-in; no
# Slurm controller: SLURM_CONF names no file), its ledger line written, then the push.
mkdir -p "$tmp/bin"
printf '#!/bin/sh\necho "srun: stand-in failing" >&2\nexit 3\n' > "$tmp/bin/srun"
chmod +x "$tmp/bin/srun"
out=$(PATH="$tmp/bin:$PATH" SLURM_CONF=$tmp/no-slurm.conf SLURM_JOB_ID=41 SLURM_RESTART_COUNT=1 \
  SLURM_JOB_NODELIST=n1 timeout 120 "$hpctrain" supervise --task-dir "$run" --spec "$run/spec.toml" \
  --job 41 --started 2026-11-28T09:01:30Z 2>&1)
[[ $out == *"hpctrain: tracking: mlflow run $run_id in experiment "*": 0 metric values sent, through step 16, "* ]] ||
  check_failed "the step supervisor did not push after the attempt: $out"
[[ $(wc -l < "$run/attempts.jsonl") == 2 ]] || check_failed "the supervisor's attempt is not in the ledger"

# 3. A last attempt completes the run: only its steps go, and the status.
{
  echo '{"kind":"started","step":13,"epoch":2,"world_size":2,"resumed_from":12,"wall_time":1795900200.0}'
  train 16 1.0 80 1795900216.0
  train 20 0.5 100 1795900220.0
  evaluated 20 0.875 1795900221.0
} >> "$run/metrics.jsonl"
echo '{"job_id":"41","array_task_id":null,"restart":2,"nodes":"n1","start":"2026-11-28T09:02:00Z","end":"2026-11-28T09:03:00Z","exit_status":0,"reason":"completed","cause":"completed","last_step":20}' >> "$run/attempts.jsonl"
expect 0 "mlflow run $run_id in experiment [0-9]+ at $uri: 7 metric values sent, through step 20, FINISHED, report uploaded" \
  "$hpctrain" track "$run"
$check "$uri" "$experiment" "$run" --status FINISHED > /dev/null || check_failed "after the second attempt"

# 4. Again: nothing sent. Without tracking.json: the same MLflow run, found by its tag.
expect 0 "mlflow run $run_id in .*: 0 metric values sent, through step 20, FINISHED$" "$hpctrain" track "$run"
rm "$run/tracking.json"
expect 0 "mlflow run $run_id in .*: 0 metric values sent" "$hpctrain" track "$run"
$check "$uri" "$experiment" "$run" --status FINISHED > /dev/null || check_failed "after a lost tracking.json"

# 5. --follow of a run that has ended: one push, then it returns.
expect 0 "mlflow run $run_id .*0 metric values sent" timeout 60 "$hpctrain" track --follow --interval 1 "$run"

# 6. A new store behind the same address: the lost run is replaced, whole.
stop_mlflow
rm -rf "$tmp/mlflow"
start_mlflow "$python" "$tmp/mlflow" "$port"
out=$("$hpctrain" track "$run" 2>&1) || check_failed "track after the store was lost: $out"
[[ $out == *"is not on the server"* && $out == *"(new)"*"26 metric values sent"* ]] ||
  check_failed "a lost MLflow run was not replaced whole: $out"
$check "$uri" "$experiment" "$run" --status FINISHED > /dev/null || check_failed "after a new store"

# 7. A run without [tracking].
untracked=$tmp/untracked
mkdir -p "$untracked"
printf '[job]\nname = "u"\nrun_dir = "%s"\n[data]\nsynthetic = true\n' "$untracked" > "$untracked/spec.toml"
expect 2 "$untracked/spec.toml has no tracking.mlflow_uri" "$hpctrain" track "$untracked"
expect 2 "is not a run directory" "$hpctrain" track "$tmp/nowhere"
finish "track: one MLflow run, every step once, across a down server, a lost state file and a new store"
