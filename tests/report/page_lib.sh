# Shared by the report tests (tests/report/report_page.sh, tests/slurm/preempt.sh): writes a run's
# page with `hpctrain report`, loads it in headless Chromium and checks it (check_page.py), and
# keeps a screenshot. Needs HPCTRAIN; CHROMIUM may name the browser (default: chromium on PATH).
report_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# report_chromium: the browser, or nothing when it is not installed.
report_chromium() {
  local c=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
  [[ -n $c && -x $c ]] && echo "$c"
}

# report_browse PROFILE_DIR ARGS...: headless Chromium with a fresh profile and a deadline.
report_browse() {
  local profile=$1; shift
  local flags=(--headless --disable-gpu --user-data-dir="$profile" --no-first-run
               --enable-logging=stderr --v=0 --virtual-time-budget=5000)
  # Chromium's sandbox refuses to run as root.
  (( EUID == 0 )) && flags+=(--no-sandbox)
  timeout 120 "$(report_chromium)" "${flags[@]}" "$@"
}

# report_check RUN_DIR SCREENSHOT WIDTHxHEIGHT [--no-metrics]: hpctrain report RUN_DIR, then the
# page's DOM checked against RUN_DIR's files and a screenshot of that size written to
# SCREENSHOT. Returns non-zero, saying why, on any failure.
report_check() {
  local run=$1 shot=$2 size=$3; shift 3
  local tmp page out
  tmp=$(mktemp -d /tmp/hpctrain-report-check.XXXXXX)
  page=$tmp/report.html
  rm -f "${shot%.png}.dom.html"
  out=$("$HPCTRAIN" report "$run" -o "$page" 2>"$tmp/report.err") || {
    echo "hpctrain report $run failed: $(cat "$tmp/report.err")" >&2; rm -rf "$tmp"; return 1; }
  [[ $out == "$page" ]] || { echo "hpctrain report printed '$out', not $page" >&2; rm -rf "$tmp"; return 1; }
  if ! report_browse "$tmp/profile" --dump-dom "file://$page" >"$tmp/dom.html" 2>"$tmp/chromium.log"; then
    echo "chromium --dump-dom failed:" >&2; tail -n 20 "$tmp/chromium.log" >&2; rm -rf "$tmp"; return 1
  fi
  if ! python3 "$report_lib_dir/check_page.py" "$tmp/dom.html" "$tmp/chromium.log" "$run" "$@"; then
    cp "$tmp/dom.html" "${shot%.png}.dom.html" 2>/dev/null
    rm -rf "$tmp"; return 1
  fi
  mkdir -p "$(dirname "$shot")"
  rm -f "$shot"
  if ! report_browse "$tmp/profile" --hide-scrollbars --window-size="${size/x/,}" \
      --screenshot="$shot" "file://$page" >"$tmp/shot.log" 2>&1; then
    echo "chromium --screenshot failed:" >&2; tail -n 20 "$tmp/shot.log" >&2; rm -rf "$tmp"; return 1
  fi
  cp "$page" "${shot%.png}.html"
  rm -rf "$tmp"
  # A real PNG of the requested size: the signature, then IHDR's width and height.
  python3 - "$shot" "$size" <<'PY'
import struct, sys
path, size = sys.argv[1], sys.argv[2]
w, h = map(int, size.split('x'))
data = open(path, 'rb').read()
if data[:8] != b'\x89PNG\r\n\x1a\n' or data[12:16] != b'IHDR':
    sys.exit('%s is not a PNG' % path)
got = struct.unpack('>II', data[16:24])
if got != (w, h):
    sys.exit('%s is %dx%d, expected %dx%d' % ((path,) + got + (w, h)))
print('%s: %dx%d PNG, %d bytes' % (path, w, h, len(data)))
PY
}
