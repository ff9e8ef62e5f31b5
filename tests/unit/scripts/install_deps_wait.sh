#!/usr/bin/env bash
# scripts/install-deps.sh waits for what a fresh machine may be doing, for real:
#   1. apt-get (apt_get_waiting) while another process holds dpkg's frontend lock, as unattended
#      upgrades do: it says it waits, naming the holder, and succeeds once the lock is free;
#   2. the same with a deadline shorter than the hold: it gives up saying so, with apt's status;
#   3. a second install-deps while one runs: it says it waits, and runs once the first is done.
# Needs root (apt-get takes dpkg's lock only as root); skips (77) otherwise.
#   install_deps_wait.sh SOURCE_DIR
set -uo pipefail
src=$1
source "$src/tests/support/expect.sh"
[[ $(id -u) == 0 ]] || { echo "skipped: not root"; exit 77; }
command -v apt-get > /dev/null || { echo "skipped: no apt-get"; exit 77; }
tmp=$(mktemp -d)
holder=
trap '[[ -n $holder ]] && kill "$holder" 2> /dev/null; rm -rf "$tmp"' EXIT

hold_dpkg() {  # hold_dpkg SECONDS: dpkg's frontend lock held by a python3 process, in the background
  rm -f "$tmp/held"
  python3 -c 'import fcntl, sys, time
f = open("/var/lib/dpkg/lock-frontend", "w")
fcntl.lockf(f, fcntl.LOCK_EX)
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[1]))' "$1" "$tmp/held" &
  holder=$!
  for _ in $(seq 100); do [[ -e $tmp/held ]] && return; sleep 0.1; done
  check_failed "the lock holder did not start"
}

sudo_cmd=()
source "$src/scripts/apt-wait.sh"

hold_dpkg 6
t0=$SECONDS
HPCTRAIN_APT_WAIT_S=60 apt_get_waiting check > /dev/null 2> "$tmp/err1"
status=$?
took=$((SECONDS - t0))
[[ $status == 0 ]] || check_failed "1: apt-get check failed ($status) after the lock was freed: $(cat "$tmp/err1")"
grep -q "waits for the apt/dpkg lock (held by process $holder (python3)" "$tmp/err1" ||
  check_failed "1: no message naming the holder: $(cat "$tmp/err1")"
(( took >= 3 )) || check_failed "1: returned after $took s while the lock was held for 6 s"
wait "$holder"

hold_dpkg 30
t0=$SECONDS
HPCTRAIN_APT_WAIT_S=3 apt_get_waiting check > /dev/null 2> "$tmp/err2"
status=$?
took=$((SECONDS - t0))
[[ $status == 100 ]] || check_failed "2: status $status, not apt-get's 100: $(cat "$tmp/err2")"
grep -q "gave up after 3 s waiting for the apt/dpkg lock (held by process $holder" "$tmp/err2" ||
  check_failed "2: no message saying it gave up: $(cat "$tmp/err2")"
(( took <= 20 )) || check_failed "2: took $took s with a 3 s deadline"
kill "$holder"; wait "$holder" 2> /dev/null; holder=

lock=${XDG_CACHE_HOME:-$HOME/.cache}/hpctrain/install-deps.lock
mkdir -p "$(dirname "$lock")"
flock "$lock" sleep 5 &
holder=$!
sleep 0.5
t0=$SECONDS
bash "$src/scripts/install-deps.sh" > /dev/null 2> "$tmp/err3"
status=$?
took=$((SECONDS - t0))
[[ $status == 0 ]] || check_failed "3: install-deps failed ($status): $(cat "$tmp/err3")"
grep -q "another install-deps is running on this machine; waiting" "$tmp/err3" ||
  check_failed "3: no message that it waits: $(cat "$tmp/err3")"
(( took >= 3 )) || check_failed "3: ran beside the other install ($took s)"
finish "ok: install-deps waits for dpkg's lock (and gives up at its deadline) and for another install"
