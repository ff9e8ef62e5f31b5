#!/usr/bin/env bash
# hpctrain report without a browser: exit statuses and messages for bad input (not a run
# directory, an output that cannot be written), the default output, and the page's text: one
# data element whose JSON no string can break out of, uPlot inlined, nothing loaded from a network.
set -uo pipefail
hpctrain=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/../support/expect.sh"

expect 2 "required" "$hpctrain" report
expect 1 "$tmp/missing is not a run directory" "$hpctrain" report "$tmp/missing"
mkdir "$tmp/plain"
expect 1 "$tmp/plain is not a run directory \(no spec.toml\)" "$hpctrain" report "$tmp/plain"

run="$tmp/a</script><!--b/run"
python3 "$here/make_fixture.py" preempted "$run" || exit 1
# An output whose folder is a file, and one in a folder that cannot be created.
touch "$tmp/file"
expect 1 "cannot write the report $tmp/file/report.html" "$hpctrain" report "$run" -o "$tmp/file/report.html"
expect 1 "cannot write the report /proc/hpctrain-report.html" "$hpctrain" report "$run" -o /proc/hpctrain-report.html
[[ -e $run/report.html ]] && check_failed "a failed report left $run/report.html"

# The default output, its path printed.
expect 0 "^$run/report.html$" "$hpctrain" report "$run"
page=$run/report.html
[[ -s $page ]] || check_failed "no $page"
# Exactly the page's own script elements close; the data, with "</script><!--" in the run
# directory and the node names, cannot close one or open a comment.
opens=$(grep -o '<script' "$page" | wc -l)
closes=$(grep -o '</script' "$page" | wc -l)
[[ $opens == 4 && $closes == 4 ]] || check_failed "$opens <script and $closes </script in the page, want 4 each"
data=$(python3 - "$page" <<'PY'
import json, re, sys
page = open(sys.argv[1], encoding='utf-8').read()
m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
if not m:
    sys.exit('no report-data element')
text = m.group(1)
if '<!--' in text or '<' in text:
    sys.exit('the data holds a raw "<"')
data = json.loads(text)
print(data['run_dir'])
print(data['runs'][0]['attempts'][0]['nodes'])
PY
) || check_failed "report data: $data"
[[ $data == "$run"$'\n'"node</script><!--<script>window.hacked=1</script>" ]] ||
  check_failed "the data does not round-trip: $data"
# Self-contained: uPlot inlined, nothing fetched.
grep -q 'var uPlot = (function' "$page" || check_failed "uPlot is not inlined"
grep -Eq '<(script|link|img)[^>]+(src|href)=' "$page" && check_failed "the page loads something: $(grep -Eo '<(script|link|img)[^>]+(src|href)=[^>]*' "$page")"
# A second report replaces the first.
expect 0 "report.html" "$hpctrain" report "$run"

finish
