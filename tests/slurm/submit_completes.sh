#!/usr/bin/env bash
# submit runs the rendered script through a real sbatch: 2 ranks start under srun with --spec,
# see the spec's environment byte for byte (shell metacharacters included), the job COMPLETES,
# its log is in the run directory and the ledger has one "completed" line.
source "$(dirname "$0")/lib.sh"

spec=$(write_spec complete env '[job.env]
NASTY_QUOTES = "it'"'"'s \"quoted\""
NASTY_SUBST = "$(touch PWNED) `touch PWNED2` ${HOME}"
NASTY_SHELL = "a; b | c & d > e # f"
NASTY_UTF8 = "héllo ✓ 日本"
NASTY_EMPTY = ""')
# [job.env] appears twice in that spec; merge it into one table.
python3 - "$spec" <<'PY'
import sys, re
p = sys.argv[1]; s = open(p).read()
first = s.index("[job.env]\n"); second = s.index("[job.env]\n", first + 1)
extra = s[second + len("[job.env]\n"):]
s = s[:second]
s = s.replace("[job.env]\n", "[job.env]\n" + extra, 1)
open(p, "w").write(s)
PY
"$HPCTRAIN" check "$spec" || fail "check failed"
id=$(submit "$spec")
run=$work/complete
wait_state "$run" COMPLETED 120
log=$run/logs/slurm-$id.out
[[ -f $log ]] || fail "no log $log"
grep -q "payload rank 0 of 2" "$log" || fail "rank 0 did not run"
grep -q "payload rank 1 of 2" "$log" || fail "rank 1 did not run"
grep -q "spec $run/spec.toml" "$log" || fail "the worker was not given the frozen spec"
[[ $(wc -l < "$run/attempts.jsonl") == 1 ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
[[ $(ledger_field "$run" 1 reason) == completed ]] || fail "ledger reason"
[[ $(ledger_field "$run" 1 job_id) == "$id" ]] || fail "ledger job id"
[[ $(ledger_field "$run" 1 exit_status) == 0 ]] || fail "ledger exit status"

# Each rank saw every value exactly.
expected=$(printf '%s\0' 'NASTY_EMPTY=' 'NASTY_QUOTES=it'"'"'s "quoted"' \
  'NASTY_SHELL=a; b | c & d > e # f' 'NASTY_SUBST=$(touch PWNED) `touch PWNED2` ${HOME}' \
  'NASTY_UTF8=héllo ✓ 日本' | od -c)
for rank in 0 1; do
  got=$(od -c < "$run/payload-rank$rank-restart0.env")
  [[ $got == "$expected" ]] || fail "rank $rank environment differs:\n$got\nwant\n$expected"
done
if compgen -G "$run/PWNED*" >/dev/null || compgen -G "$HOME/PWNED*" >/dev/null; then
  fail "a spec value was executed"
fi
"$HPCTRAIN" status "$run" | grep -q "COMPLETED" || fail "status text"
echo "ok"
