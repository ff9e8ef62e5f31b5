#!/usr/bin/env bash
# The worker binary pinned across a real requeue (docs/resilience.md "The same worker binary"):
# two runs, each with its own copy of the stand-in worker, are requeued by the cluster after the
# test changed their copy's bytes during the first attempt.
#   - pinned (resilience.require_same_binary default true): the second attempt stops before srun,
#     its first log line naming both binaries; ledger setup_failed with cause bad_input, exit
#     status 2; the changed worker never runs; provenance.json keeps the first binary; the job
#     ends FAILED; hpctrain status shows the binary line.
#   - let through (require_same_binary = false): the second attempt says the change and runs,
#     provenance.json records it under changes, the run completes.
source "$(dirname "$0")/lib.sh"

for name in pinned let-through; do
  cp "$payload" "$work/worker-$name.sh"
  chmod +x "$work/worker-$name.sh"
done
write_spec pinned go-then-requeue-twice > /dev/null
write_spec let-through go-then-requeue-twice "[resilience]
require_same_binary = false" > /dev/null
sed -i "s|^worker = .*|worker = \"$work/worker-pinned.sh\"|" "$work/pinned.toml"
sed -i "s|^worker = .*|worker = \"$work/worker-let-through.sh\"|" "$work/let-through.toml"
pinned_id=$(submit "$work/pinned.toml")
through_id=$(submit "$work/let-through.toml")
for name in pinned let-through; do
  run=$work/$name
  wait_for 120 "$name's first attempt" test -e "$run/payload-rank0-restart0"
  first=$(jq -r .first.sha256 "$run/provenance.json")
  [[ $first == $(sha256sum "$work/worker-$name.sh" | cut -d' ' -f1) ]] ||
    fail "$name: provenance.json's first binary is not the worker's: $(cat "$run/provenance.json")"
  # A rebuilt worker while the run goes on: other bytes at the same path.
  echo "# rebuilt" >> "$work/worker-$name.sh"
  : > "$run/go-0"
done

# Pinned: the requeued attempt stops before its first step.
run=$work/pinned
wait_state "$run" FAILED 120
[[ $(ledger_field "$run" 2 reason) == setup_failed && $(ledger_field "$run" 2 cause) == bad_input ]] ||
  fail "pinned: the second attempt's ledger line: $(sed -n 2p "$run/attempts.jsonl")"
[[ $(ledger_field "$run" 2 exit_status) == 2 ]] || fail "pinned: exit status $(ledger_field "$run" 2 exit_status)"
grep -q "the worker binary differs from the run's first attempt: was ${first:0:12}" "$run/logs/slurm-$pinned_id.err" ||
  fail "pinned: the log does not say why: $(cat "$run/logs/slurm-$pinned_id.err")"
[[ ! -e $run/payload-rank0-restart1 ]] || fail "pinned: the changed worker ran"
[[ $(jq -r '.changes | length' "$run/provenance.json") == 0 ]] || fail "pinned: a refused change was recorded"
"$HPCTRAIN" status "$run" | grep -Eq "^binary: +$work/worker-pinned.sh sha256 ${first:0:12} \(the first attempt's, job $pinned_id\)" ||
  fail "pinned: status has no binary line: $("$HPCTRAIN" status "$run")"

# Let through: the change is said and recorded, and the run goes on to completion.
run=$work/let-through
wait_for 120 "let-through's second attempt" test -e "$run/payload-rank0-restart1"
: > "$run/go-1"
wait_state "$run" COMPLETED 120
grep -q "worker binary differs" "$run/logs/slurm-$through_id.err" ||
  fail "let-through: the change is not in the log: $(cat "$run/logs/slurm-$through_id.err")"
[[ $(jq -r '.changes | length' "$run/provenance.json") == 1 ]] ||
  fail "let-through: provenance.json: $(cat "$run/provenance.json")"
[[ $(ledger_field "$run" 3 reason) == completed ]] || fail "let-through: ledger: $(cat "$run/attempts.jsonl")"
echo "ok"
