# Sourced by install-deps.sh. apt_get_waiting ARG...: apt-get ARG..., waiting while another
# program holds apt's or dpkg's locks (unattended upgrades on a fresh machine, another install),
# at most HPCTRAIN_APT_WAIT_S seconds (default 900) in all, with a message every 30 s naming the
# holder; then it gives up, saying so, with apt-get's status (100).
# lock_holder: "held by process PID (NAME)" for the first process holding one of apt's or dpkg's
# locks (from /proc/locks), or "holder unknown".
lock_holder() {
  local f ino pid
  for f in /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock \
           /var/cache/apt/archives/lock; do
    ino=$(stat -c %i "$f" 2> /dev/null) || continue
    pid=$(awk -v ino="$ino" '{ n = split($6, a, ":"); if (a[n] == ino) { print $5; exit } }' /proc/locks)
    if [[ $pid =~ ^[0-9]+$ ]]; then
      echo "held by process $pid ($(cat "/proc/$pid/comm" 2> /dev/null || echo '?'))"
      return
    fi
  done
  echo "holder unknown"
}

apt_get_waiting() {
  local limit=${HPCTRAIN_APT_WAIT_S:-900} start=$SECONDS out status said=-30 holder
  [[ $limit =~ ^[0-9]+$ ]] || { printf 'install-deps: HPCTRAIN_APT_WAIT_S=%s is not a number of seconds\n' "$limit" >&2; return 2; }
  out=$(mktemp)
  while :; do
    # apt's own DPkg::Lock::Timeout covers dpkg's locks but not the lists lock of `update`: this
    # loop waits for both, and can say who holds them while it does.
    "${sudo_cmd[@]}" apt-get "$@" 2> "$out" && status=0 || status=$?
    if (( status == 0 )) || ! grep -qE 'Could not get lock|Unable to acquire|Unable to lock' "$out"; then
      cat "$out" >&2
      rm -f "$out"
      return "$status"
    fi
    holder=$(lock_holder)
    if (( SECONDS - start >= limit )); then
      printf 'install-deps: gave up after %d s waiting for the apt/dpkg lock (%s): %s\n' \
        "$limit" "$holder" "$(grep -m1 -E 'lock' "$out")" >&2
      rm -f "$out"
      return "$status"
    fi
    if (( SECONDS - said >= 30 )); then
      printf 'install-deps: apt-get %s waits for the apt/dpkg lock (%s; up to %d s more)\n' \
        "$1" "$holder" "$(( limit - (SECONDS - start) ))" >&2
      said=$SECONDS
    fi
    sleep 2
  done
}
