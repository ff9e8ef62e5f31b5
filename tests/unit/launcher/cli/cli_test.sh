#!/usr/bin/env bash
# The hpctrain CLI as users run it: exit statuses (0 ok, 2 spec errors, 1 other failures),
# messages that name the file, `init` output and every example in configs/ pass `check`,
# deterministic `render`.
set -uo pipefail
hpctrain=$1
source_dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/expect.sh"

expect 0 "hpctrain 0" "$hpctrain" --version
expect 2 "required" "$hpctrain" check
expect 2 "not expected|help" "$hpctrain" nosuchcommand
expect 2 "missing.toml: error: no such file" "$hpctrain" check missing.toml

# init writes a starter that passes check (the worker may not be built: skip path checks).
expect 0 "wrote starter.toml" "$hpctrain" init starter.toml
expect 1 "exists" "$hpctrain" init starter.toml
expect 0 "starter.toml: ok" "$hpctrain" check --offline --no-path-checks starter.toml
expect 0 '\[job\]' "$hpctrain" init

# Spec errors: exit 2, every problem, file:line:col.
cat > bad.toml <<'TOML'
[job]
name = "x"
run_dir = "/r"
nodse = 2
[train]
epochs = -1
[data]
synthetic = true
TOML
expect 2 'bad.toml:4:1: error: \[job.nodse\] unknown key.*did you mean "job.nodes".*bad.toml:6:1: error: \[train.epochs\].*2 errors' \
  "$hpctrain" check --no-path-checks bad.toml

# A spec full of shell metacharacters renders, and the script is valid bash.
cat > meta.toml <<'TOML'
[job]
name = "meta"
run_dir = "/var/tmp/runs/{name}"
env = { A = "$(touch pwned)", B = "`touch pwned`; echo '", C = "a|b&c>d" }
[data]
synthetic = true
TOML
expect 0 "" "$hpctrain" render meta.toml -o meta.sbatch
bash -n meta.sbatch || check_failed "rendered script is not valid bash"
grep -q "^export A='\$(touch pwned)'$" meta.sbatch || check_failed "A not single-quoted: $(grep 'export A' meta.sbatch)"
[[ ! -e pwned ]] || check_failed "rendering executed something"
# Determinism: rendering twice gives identical bytes.
"$hpctrain" render meta.toml > a.sbatch && "$hpctrain" render meta.toml > b.sbatch
cmp -s a.sbatch b.sbatch || check_failed "render is not deterministic"
# The same spec with --set overrides.
expect 0 "" "$hpctrain" render meta.toml --set job.nodes=3 -o three.sbatch
grep -q '^#SBATCH --nodes=3$' three.sbatch || check_failed "--set job.nodes=3 not rendered"
expect 2 "\-\-set job.nodes=zero" "$hpctrain" render meta.toml --set job.nodes=zero

# submit --dry-run writes the run directory without Slurm; while nothing was submitted from it a
# changed spec replaces the dry run's; once submitted, a different spec is refused.
sed -i "s|/var/tmp/runs/{name}|$tmp/runs/{name}|" meta.toml
expect 0 "dry run" "$hpctrain" submit --dry-run --set job.worker=/bin/true meta.toml
[[ -f runs/meta/spec.toml && -f runs/meta/job.sbatch && -d runs/meta/logs ]] || check_failed "dry run wrote no run dir"
expect 0 "was never submitted; its spec \(from a dry run\) is replaced" "$hpctrain" submit --dry-run --set job.worker=/bin/true --set train.epochs=2 meta.toml
grep -q '^epochs = 2$' runs/meta/spec.toml || check_failed "the dry run's spec was not replaced"
expect 0 "not submitted" "$hpctrain" status runs/meta
expect 1 "not a run directory" "$hpctrain" status "$tmp"
expect 1 "no submitted job" "$hpctrain" cancel runs/meta
echo '{"job_id":"4711","submitted_at":"2026-11-22T02:48:07Z","array_tasks":0}' > runs/meta/submissions.jsonl
expect 1 "holds a different spec" "$hpctrain" submit --dry-run --set job.worker=/bin/true --set train.epochs=3 meta.toml
expect 0 "replaced" "$hpctrain" submit --dry-run --force --set job.worker=/bin/true --set train.epochs=3 meta.toml
# sbatch's -d/--dependency and --begin on submit are the spec keys job.dependency and job.begin.
expect 0 "dry run" "$hpctrain" submit --dry-run --force --set job.worker=/bin/true --set train.epochs=3 \
  -d afterok:4711 --begin now+1hour meta.toml
grep -q '^#SBATCH --dependency=afterok:4711$' runs/meta/job.sbatch || check_failed "-d not rendered"
grep -q '^#SBATCH --begin=now+1hour$' runs/meta/job.sbatch || check_failed "--begin not rendered"
grep -q '^dependency = "afterok:4711"$' runs/meta/spec.toml || check_failed "-d not frozen as job.dependency"
expect 2 "job.dependency" "$hpctrain" submit --dry-run --force --set job.worker=/bin/true -d 'afterok:x' meta.toml

# Every example spec passes check (paths and partitions are a cluster's, not this machine's: no
# path checks, and --offline, so that a local cluster SLURM_CONF may name is not asked).
for spec in "$source_dir"/configs/*.toml; do
  expect 0 "$(basename "$spec"): ok" "$hpctrain" check --offline --no-path-checks "$spec"
done
(( $(ls "$source_dir"/configs/*.toml | wc -l) >= 5 )) || check_failed "configs/ lost its examples"

# keys lists every key.
expect 0 "job.run_dir" "$hpctrain" keys

finish "cli tests passed"
