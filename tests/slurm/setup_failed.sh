#!/usr/bin/env bash
# Setup failures end the attempt as setup_failed with status 2, before any rank starts and without
# a requeue: the frozen spec gone when the job starts (submitted held, spec.toml moved away, then
# released), and a module that does not load (job.modules on a node without that module).
source "$(dirname "$0")/lib.sh"

spec=$(write_spec nospec ok)
id=$(submit "$spec" --set 'job.extra_sbatch=["--hold"]')
wait_state "$work/nospec" PENDING 30
mv "$work/nospec/spec.toml" "$work/nospec/spec.toml.away"
scontrol release "$id" || fail "scontrol release"

spec=$(write_spec nomodule ok)
# Without USER and LOGNAME in the job's environment (a batch job need not have them), Debian's
# /etc/profile.d/lmod.sh reads an unset LOGNAME: under the script's set -u that must not end the
# script before the attempt is recorded.
saved_user=${USER-} saved_logname=${LOGNAME-}
unset USER LOGNAME
submit "$spec" --set 'job.modules=["hpctrain-no-such-module/0.0"]' >/dev/null
export USER=$saved_user LOGNAME=$saved_logname

wait_for 60 "ledger line of nospec" test -s "$work/nospec/attempts.jsonl"
mv "$work/nospec/spec.toml.away" "$work/nospec/spec.toml"
for run in nospec nomodule; do
  wait_state "$work/$run" FAILED 60
  [[ $(wc -l < "$work/$run/attempts.jsonl") == 1 ]] || fail "$run ledger: $(cat "$work/$run/attempts.jsonl")"
  [[ $(ledger_field "$work/$run" 1 reason) == setup_failed ]] || fail "$run ledger reason"
  [[ $(ledger_field "$work/$run" 1 exit_status) == 2 ]] || fail "$run ledger status"
  compgen -G "$work/$run/payload-rank*" >/dev/null && fail "$run: a rank started"
done
grep -q "frozen spec $work/nospec/spec.toml is missing" "$work/nospec/logs/slurm-$id.err" ||
  fail "nospec: no message about the missing spec"
grep -q "'module load hpctrain-no-such-module/0.0' failed" "$work"/nomodule/logs/slurm-*.err ||
  fail "nomodule: no message about the module"
echo "ok"
