#!/usr/bin/env bash
# hpctrain report in a real browser: fixture run directories (tests/report/make_fixture.py) — a run
# requeued once whose metrics repeat the steps after the resume, a job array of two tasks, a run
# that lost nodes inside its allocation, a run continued by a chain of jobs, a run with no metrics
# yet — each written with
# `hpctrain report`, loaded in headless Chromium and checked (check_page.py); the screenshots stay
# in ARTIFACT_DIR.
# report_page.sh HPCTRAIN ARTIFACT_DIR. Exits 77 (skipped) without Chromium.
set -uo pipefail
export HPCTRAIN=$1
artifacts=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/page_lib.sh"
if [[ -z $(report_chromium) ]]; then
  echo "SKIP: chromium not found (Debian package chromium; scripts/install-deps.sh installs it)"
  exit 77
fi
work=$(mktemp -d /tmp/hpctrain-report-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
status=0

# The run directory's path carries "</script><!--": the page must show it whole and still work.
preempted="$work/odd</script><!--name/preempted"
python3 "$here/make_fixture.py" preempted "$preempted" || exit 1
python3 "$here/make_fixture.py" array "$work/array" || exit 1
python3 "$here/make_fixture.py" empty "$work/empty" || exit 1
python3 "$here/make_fixture.py" nodeloss "$work/nodeloss" || exit 1
python3 "$here/make_fixture.py" chain "$work/chain" || exit 1

echo "== a preempted run"
report_check "$preempted" "$artifacts/report.png" 1400x2400 || status=1
echo "== a job array of two tasks"
report_check "$work/array" "$artifacts/report-array.png" 1400x4800 || status=1
echo "== node losses inside the allocation, then a requeue"
report_check "$work/nodeloss" "$artifacts/report-nodeloss.png" 1400x2600 || status=1
echo "== a chain of three jobs (Slurm refused the requeue)"
report_check "$work/chain" "$artifacts/report-chain.png" 1400x1600 || status=1
echo "== no metrics yet"
report_check "$work/empty" "$artifacts/report-empty.png" 1200x600 --no-metrics || status=1
(( status == 0 )) && echo ok
exit $status
