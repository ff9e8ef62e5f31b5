# Sourced by the tests of hpctrain --host: a real sshd (Debian's openssh-server) on loopback, the
# test's own, and an ssh set up to reach it. Needs fail (tests/support/fail.sh).
#   start_sshd DIR NAME=VALUE...  starts sshd with files in DIR (host key, authorized key, config,
#     log) on a free high port; the sessions it starts get the NAME=VALUE variables (PATH among
#     them: where their hpctrain and Slurm commands are). Writes DIR/ssh_config with the hosts
#     remote-test (the test's key, ControlMaster on), refused-key (a key sshd does not accept)
#     and wrong-port (a port nothing listens on), and DIR/ssh, the program for HPCTRAIN_SSH (ssh
#     with -F DIR/ssh_config). Fails the test when sshd does not start; exits 77 (skip) without
#     openssh-server or openssh-client.
#   stop_sshd  ends the ControlMaster and sshd, each wait with a deadline; for the EXIT trap.
#   sshd_log   the end of sshd's log, for a failure's context.
sshd_dir= sshd_pid= sshd_port=
sshd_program=/usr/sbin/sshd

start_sshd() {
  sshd_dir=$1
  shift
  local tool key try
  for tool in "$sshd_program" ssh ssh-keygen; do
    command -v "$tool" > /dev/null || {
      echo "SKIP: no $tool (openssh-server and openssh-client, scripts/apt-packages.txt)"
      exit 77
    }
  done
  for key in host_key user_key refused_key; do
    ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/$key" || fail "ssh-keygen $key"
  done
  cp "$sshd_dir/user_key.pub" "$sshd_dir/authorized_keys"
  [[ $(id -u) == 0 ]] && mkdir -p /run/sshd # its privilege separation folder, as root
  for try in 1 2 3 4 5; do
    _sshd_listen "$@" && break
    ((try < 5)) || fail "sshd did not start on any of 5 ports: $(sshd_log)"
  done
  _ssh_client
}

# One try on a random port, sshd in the foreground (-D) so that its pid is this test's.
_sshd_listen() {
  sshd_port=$((20000 + RANDOM % 40000))
  printf '%s\n' "Port $sshd_port" "ListenAddress 127.0.0.1" "HostKey $sshd_dir/host_key" \
    "AuthorizedKeysFile $sshd_dir/authorized_keys" "PidFile none" "StrictModes no" \
    "PermitRootLogin prohibit-password" "PasswordAuthentication no" \
    "KbdInteractiveAuthentication no" "UsePAM no" "SetEnv $*" > "$sshd_dir/sshd_config"
  "$sshd_program" -D -e -f "$sshd_dir/sshd_config" 2> "$sshd_dir/sshd.log" &
  sshd_pid=$!
  local deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)) && kill -0 "$sshd_pid" 2> /dev/null; do
    grep -q "Server listening on 127.0.0.1 port $sshd_port" "$sshd_dir/sshd.log" && return 0
    sleep 0.05
  done
  kill "$sshd_pid" 2> /dev/null
  wait "$sshd_pid" 2> /dev/null
  sshd_pid=
  return 1
}

_ssh_client() {
  echo "[127.0.0.1]:$sshd_port $(cut -d' ' -f1,2 "$sshd_dir/host_key.pub")" \
    > "$sshd_dir/known_hosts"
  local host port key common=(
    "  HostName 127.0.0.1" "  User $(id -un)" "  IdentitiesOnly yes"
    "  UserKnownHostsFile $sshd_dir/known_hosts" "  StrictHostKeyChecking yes" "  BatchMode yes"
    "  LogLevel ERROR")
  {
    printf '%s\n' "Host remote-test" "  ControlMaster auto" "  ControlPath $sshd_dir/cm-%C" \
      "  ControlPersist 60"
    for host in remote-test refused-key wrong-port; do
      port=$sshd_port key=user_key
      [[ $host == refused-key ]] && key=refused_key
      [[ $host == wrong-port ]] && port=1
      printf '%s\n' "Host $host" "  Port $port" "  IdentityFile $sshd_dir/$key" "${common[@]}"
    done
  } > "$sshd_dir/ssh_config"
  printf '#!/bin/bash\nexec %q -F %q "$@"\n' "$(command -v ssh)" "$sshd_dir/ssh_config" \
    > "$sshd_dir/ssh"
  chmod +x "$sshd_dir/ssh"
  "$sshd_dir/ssh" remote-test true || fail "ssh to the test's sshd failed: $(sshd_log)"
}

stop_sshd() {
  if [[ -n $sshd_dir && -f $sshd_dir/ssh_config ]]; then
    timeout 10 ssh -F "$sshd_dir/ssh_config" -O exit remote-test 2> /dev/null
  fi
  if [[ -n $sshd_pid ]]; then
    kill "$sshd_pid" 2> /dev/null
    timeout 10 tail --pid="$sshd_pid" -f /dev/null
    wait "$sshd_pid" 2> /dev/null
  fi
  sshd_pid=
}

sshd_log() {
  echo "--- sshd log:"
  tail -20 "$sshd_dir/sshd.log" 2> /dev/null
}
