# Sourced by the command-line test scripts: failures are counted, not fatal, so one run reports
# every broken case. `check_failed MESSAGE` counts one and goes on; `finish` ends the script:
# status 1 and the count when any failed. `fail` (tests/support/fail.sh) still ends it at once.
source "$(dirname "${BASH_SOURCE[0]}")/fail.sh"
failures=0
check_failed() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect STATUS PATTERN CMD...: run CMD, check its exit status and that stderr+stdout match PATTERN.
expect() {
  local want=$1 pattern=$2; shift 2
  local out status
  out=$("$@" 2>&1); status=$?
  [[ $status == "$want" ]] || check_failed "'$*' exited $status, want $want; output: $out"
  [[ $out =~ $pattern ]] || check_failed "'$*' output does not match /$pattern/: $out"
}

finish() {
  (( failures == 0 )) || { echo "$failures failure(s)" >&2; exit 1; }
  echo "${1:-ok}"
}
