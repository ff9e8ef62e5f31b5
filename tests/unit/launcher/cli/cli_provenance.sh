#!/usr/bin/env bash
# hpctrain supervise (the batch script's step supervisor) and the worker binary a run's first
# attempt recorded (provenance.json; docs/resilience.md "The same worker binary"): an attempt whose
# job.worker has other bytes stops before any step, exit status 2, its log line naming the run
# directory, both binaries and resilience.require_same_binary, and the ledger line setup_failed
# with cause bad_input (not retried) and that line as evidence. The record is left as it was.
#   cli_provenance.sh HPCTRAIN   (no Slurm needed: nothing reaches srun)
set -uo pipefail
hpctrain=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/expect.sh"

run=$tmp/run-dir
mkdir -p "$run"
printf 'the rebuilt worker\n' > "$tmp/hpctrain-worker"
chmod +x "$tmp/hpctrain-worker"
cat > "$run/spec.toml" <<TOML
[job]
name = "provenance"
run_dir = "$run"
worker = "$tmp/hpctrain-worker"
[data]
synthetic = true
TOML
# What the first attempt recorded: another binary (the SHA-256 of "the first worker\n").
first=$(printf 'the first worker\n' | sha256sum | cut -d' ' -f1)
cat > "$run/provenance.json" <<JSON
{"first": {"path": "$tmp/hpctrain-worker", "size": 17, "mtime": 1764300000, "sha256": "$first",
           "job_id": "41", "launcher_version": "0", "time": "2026-11-28T06:00:00Z"},
 "changes": []}
JSON
cp "$run/provenance.json" "$tmp/record"
supervise() {
  SLURM_JOB_ID=42 SLURM_RESTART_COUNT=1 "$hpctrain" supervise --task-dir "$run" \
    --spec "$run/spec.toml" --job 42 --started 2026-11-28T06:30:00Z
}
expect 2 "the run stopped: the worker binary differs from the run's first attempt: was ${first:0:12}.*now .*resilience.require_same_binary = false in $run/spec.toml" \
  supervise
line=$(tail -n 1 "$run/attempts.jsonl" 2>/dev/null)
[[ $(jq -r .reason <<<"$line") == setup_failed && $(jq -r .cause <<<"$line") == bad_input ]] ||
  check_failed "the ledger line is not setup_failed/bad_input: $line"
[[ $(jq -r .evidence <<<"$line") == *"worker binary differs"* ]] ||
  check_failed "the ledger line's evidence does not say why: $line"
cmp -s "$run/provenance.json" "$tmp/record" || check_failed "the record was changed by a refused attempt"
# The same bytes as recorded: no refusal (the supervisor goes on to Slurm, which is not here:
# only that it did not stop for the binary is checked).
printf 'the first worker\n' > "$tmp/hpctrain-worker"
out=$(timeout 60 bash -c "$(declare -f supervise); hpctrain='$hpctrain' run='$run' supervise" 2>&1)
[[ $out != *"worker binary differs"* ]] || check_failed "the recorded binary was refused: $out"
finish "provenance: a rebuilt worker refused before its first step, the recorded one let through"
