#!/usr/bin/env bash
# The README's "Using it" lines, run as written, one after another, from the checkout: a user who
# ran the demo can go on with them. Every line must exit 0 (no "command not found", no "no Slurm
# controller"), and what each shows is checked: the submitted job in status and list, its log,
# the report page, the job cancelled, the cluster stopped. Two things differ from a user's
# machine, through the knobs the scripts document: the cluster's directory (HPCTRAIN_CLUSTER_DIR)
# and the build directory (HPCTRAIN_BUILD_DIR) are this test's, and /var/tmp/my-runs is a
# directory of its own. Data: data/fashion-mnist/ as the demo converts it (converted here if
# missing).
#   readme_steps.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
source "$src/tests/support/expect.sh"
command -v slurmctld > /dev/null || { echo "skipped: no slurmctld"; exit 77; }
tmp=$(mktemp -d /var/tmp/hpctrain-readme.XXXXXX)
export HPCTRAIN_CLUSTER_DIR=$tmp/cluster HPCTRAIN_BUILD_DIR=$build
trap '"$src/scripts/slurm-local.sh" stop "$tmp/cluster" > /dev/null 2>&1; rm -rf "$tmp"' EXIT

# The block: the indented lines after "## Using it", up to the first line of prose after them.
mapfile -t lines < <(awk '/^## Using it/ { on = 1; next }
  on && /^    / { sub(/^    /, ""); print; seen = 1; next }
  on && seen && /^[^ ]/ { exit }' "$src/README.md")
(( ${#lines[@]} >= 10 )) || fail "found ${#lines[@]} lines under the README's 'Using it'"

fmnist=/usr/share/datasets/fashion-mnist
for part in train:train t10k:test; do
  out=$src/data/fashion-mnist/${part##*:}.h5
  [[ -f $out ]] && continue
  mkdir -p "$src/data/fashion-mnist"
  "$build/bin/hpctrain-data" idx --fashion --quiet --images "$fmnist/${part%%:*}-images-idx3-ubyte.gz" \
    --labels "$fmnist/${part%%:*}-labels-idx1-ubyte.gz" -o "$out" || fail "converting $part"
done

# One shell, as a user's: env.sh's exports reach the lines after it. Each line's output and status
# go to a file of its own.
cd "$src" || fail "cd $src"
run=$tmp/my-runs/fashion-mnist-r20
PATH=$(tr ':' '\n' <<<"$PATH" | grep -vx "$build/bin" | paste -sd:)  # not on PATH beforehand
i=0
for line in "${lines[@]}"; do
  i=$((i + 1))
  line=${line//\/var\/tmp\/my-runs/$tmp/my-runs}
  command=${line%%#*}
  echo "\$ $command"
  eval "$command" > "$tmp/out.$i" 2>&1
  status=$?
  sed 's/^/    /' "$tmp/out.$i" | head -n 15
  [[ $status == 0 ]] || check_failed "line $i exited $status: $line"
  grep -qE 'command not found|no Slurm controller' "$tmp/out.$i" && check_failed "line $i: $(head -n 3 "$tmp/out.$i")"
  case $command in
    "hpctrain init"*) [[ -s my-run.toml ]] || check_failed "init wrote no my-run.toml"; rm -f my-run.toml ;;
    "hpctrain submit"*) grep -qE 'Submitted|job [0-9]+' "$tmp/out.$i" || check_failed "submit named no job" ;;
    "hpctrain status"*) grep -q 'fashion-mnist-r20' "$tmp/out.$i" || check_failed "status does not name the run" ;;
    "hpctrain logs"*) grep -q 'final:' "$tmp/out.$i" || check_failed "the log followed has no final line" ;;
    "hpctrain list"*) grep -qE 'fashion-mnist-r20 +COMPLETED' "$tmp/out.$i" ||
      check_failed "list does not show the run completed" ;;
    "hpctrain report"*) [[ -s $run/report.html ]] || check_failed "report wrote no $run/report.html" ;;
    "hpctrain keys"*) grep -q 'train.epochs' "$tmp/out.$i" || check_failed "keys does not list train.epochs" ;;
  esac
done
command -v hpctrain > /dev/null || check_failed "hpctrain is not on PATH after the README's lines"
[[ -e $tmp/cluster/slurmctld.pid ]] && kill -0 "$(cat "$tmp/cluster/slurmctld.pid")" 2> /dev/null &&
  check_failed "the cluster still runs after 'scripts/slurm-local.sh stop'"
finish "ok: the README's ${#lines[@]} lines run as written"
