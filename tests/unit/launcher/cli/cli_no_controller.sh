#!/usr/bin/env bash
# submit, cancel and status with no Slurm controller to talk to: SLURM_CONF naming a file
# that does not exist, and a slurm.conf whose controller port nothing listens on. The message says
# so and how to check; a failed submit leaves no run directory it created behind, and never
# touches one that existed before.
#   cli_no_controller.sh HPCTRAIN PAYLOAD   (needs Slurm's client programs, no cluster)
set -uo pipefail
hpctrain=$1 payload=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/expect.sh"

spec() {  # spec NAME RUN_DIR [EXTRA]
  cat > "$tmp/$1.toml" <<TOML
[job]
name = "$1"
run_dir = "$2"
worker = "$payload"
[data]
synthetic = true
${3:-}
TOML
  echo "$tmp/$1.toml"
}

printf 'ClusterName=nowhere\nSlurmctldHost=localhost\nSlurmctldPort=1\n' > "$tmp/dead.conf"
unreachable='no Slurm controller was reachable.*scontrol ping.*SLURM_CONF'
for conf in "$tmp/no-such.conf" "$tmp/dead.conf"; do
  export SLURM_CONF=$conf
  echo "SLURM_CONF=$conf"
  # A new run directory (two new parents) is not left behind.
  s=$(spec fresh "$tmp/runs/a/b/fresh")
  expect 1 "$unreachable.*removed $tmp/runs" "$hpctrain" submit "$s"
  [[ -e $tmp/runs ]] && check_failed "submit left $tmp/runs behind: $(find "$tmp/runs")"
  [[ $SLURM_CONF == */dead.conf ]] && expect 1 "Unable to contact slurm controller" "$hpctrain" submit "$s"
  # A dry run's directory stays, with its spec, after a failed submit.
  s=$(spec drafted "$tmp/drafted")
  "$hpctrain" submit --dry-run "$s" 2>/dev/null || check_failed "dry run"
  expect 1 "$unreachable" "$hpctrain" submit "$s"
  [[ -f $tmp/drafted/spec.toml && -f $tmp/drafted/job.sbatch ]] || check_failed "the dry run's directory went"
  # So does a run with earlier submissions; cancel and status say the same.
  mkdir -p "$tmp/earlier"
  s=$(spec earlier "$tmp/earlier")
  "$hpctrain" submit --dry-run "$s" 2>/dev/null || check_failed "dry run"
  echo '{"job_id":"4711","submitted_at":"2026-11-22T02:48:07Z","array_tasks":0}' > "$tmp/earlier/submissions.jsonl"
  expect 1 "$unreachable" "$hpctrain" submit "$s"
  [[ $(cat "$tmp/earlier/submissions.jsonl") == *4711* ]] || check_failed "earlier submissions touched"
  expect 1 "$unreachable" "$hpctrain" cancel "$tmp/earlier"
  expect 0 "slurm: +unavailable: $unreachable" "$hpctrain" status "$tmp/earlier"
  rm -rf "$tmp/drafted" "$tmp/earlier"
done
# Without SLURM_CONF and without /etc/slurm/slurm.conf Slurm looks for a controller in DNS.
if [[ ! -e /etc/slurm/slurm.conf ]]; then
  unset SLURM_CONF
  s=$(spec dns "$tmp/dns")
  expect 1 "no Slurm controller was reachable.*Could not establish a configuration source.*SLURM_CONF is not set" \
    "$hpctrain" submit "$s"
  [[ -e $tmp/dns ]] && check_failed "submit left $tmp/dns behind"
fi
finish
