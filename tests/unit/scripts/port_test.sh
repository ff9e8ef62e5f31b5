#!/usr/bin/env bash
# tests/support/port.sh's reserve_port: shells that reserve side by side never get the same port,
# a reservation lasts as long as its shell and is free again once that shell is gone (killed
# included), a port something listens on is never given, and a range with nothing left says so.
# Its own lock directory and ports 15000.. (outside the tests' 20000..32000), so the tests
# running beside it neither disturb it nor are disturbed.
#   port_test.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../support/expect.sh"
source "$here/../../support/port.sh"
tmp=$(mktemp -d /var/tmp/hpctrain-port-test.XXXXXX)
holders=()
cleanup() { kill -9 "${holders[@]}" 2> /dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
hpctrain_port_dir=$tmp/locks
export hpctrain_port_dir

# Eight free ports in a row at or above 15000.
lo=15000
in_use() { ss -Htan | awk '{print $4}' | sed 's/.*://' | grep -qxE "$(seq -s'|' "$1" "$2")"; }
while in_use "$lo" $((lo + 7)); do lo=$((lo + 8)); done
hi=$((lo + 7))

# hold N: a shell that reserves one port of lo..hi (trying again every 0.1 s while none is
# free), writes it to $tmp/held.N and waits to be killed; its pid joins holders.
hold() {
  # Not with this shell's reservation: a child inherits its descriptor, and the lock with it.
  ( [[ -n ${reserved_port_fd:-} ]] && exec {reserved_port_fd}>&-
    exec bash -c 'source "$1"; hpctrain_port_dir=$2
           until reserve_port p "$3" "$4" 2> /dev/null; do sleep 0.1; done
           echo "$p" > "$5.tmp" && mv "$5.tmp" "$5"; exec sleep 600' \
      hold "$here/../../support/port.sh" "$hpctrain_port_dir" "$lo" "$hi" "$tmp/held.$1" ) &
  holders+=($!)
}
wait_held() {  # wait_held N...: until each holder N wrote its port (deadline 30 s)
  local n deadline=$((SECONDS + 30))
  for n in "$@"; do
    until [[ -s $tmp/held.$n ]]; do
      ((SECONDS < deadline)) || fail "holder $n reserved no port within 30 s"
      sleep 0.05
    done
  done
}

# 1. Eight shells at once over eight ports: eight different ports.
for n in 0 1 2 3 4 5 6 7; do hold "$n"; done
wait_held 0 1 2 3 4 5 6 7
distinct=$(cat "$tmp"/held.? | sort -u | wc -l)
[[ $distinct == 8 ]] || check_failed "8 shells reserving side by side got $distinct different ports: $(cat "$tmp"/held.? | tr '\n' ' ')"

# 2. All eight held: a ninth reservation says there is none, and sets nothing.
unset got
expect 1 "no free port in $lo..$hi" reserve_port got "$lo" "$hi"
reserve_port got "$lo" "$hi" 2> /dev/null
[[ -z ${got:-} ]] || check_failed "reserve_port set a port with every one held: $got"

# 3. A holder killed (SIGKILL: no trap runs) frees its port, and only that one.
freed=$(cat "$tmp/held.3")
kill -9 "${holders[3]}"
wait "${holders[3]}" 2> /dev/null
reserve_port got "$lo" "$hi" || check_failed "no port after holder 3 was killed"
[[ ${got:-} == "$freed" ]] || check_failed "after holder 3 ($freed) was killed, got ${got:-none}"

# 4. In this shell the reservation holds until it is closed: a new holder gets none till then.
hold 8
sleep 1
[[ ! -e $tmp/held.8 ]] || check_failed "a port was reserved twice: $(cat "$tmp/held.8")"
exec {reserved_port_fd}>&-
wait_held 8
[[ $(cat "$tmp/held.8") == "$freed" ]] || check_failed "after the close, holder 8 got $(cat "$tmp/held.8"), want $freed"

# 5. A port something listens on is never given, though no test holds it.
kill -9 "${holders[@]}" 2> /dev/null
wait 2> /dev/null
listen_port=$lo
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); open(sys.argv[2], "w").close()
time.sleep(600)' "$listen_port" "$tmp/listening" &
holders+=($!)
deadline=$((SECONDS + 30))
until [[ -e $tmp/listening ]]; do
  ((SECONDS < deadline)) || fail "the listener did not start"
  sleep 0.05
done
unset got
expect 1 "no free port in $listen_port..$listen_port" reserve_port got "$listen_port" "$listen_port"

finish "reserve_port: 8 shells side by side, 8 ports; none left: refused; a killed holder's port freed; a listener's port never given"
