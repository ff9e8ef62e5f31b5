#!/usr/bin/env bash
# A real N-node Slurm cluster on one machine, for bugs that hide on one node (rank and rendezvous
# addresses, hostnames, node-local /tmp). Each node is a network namespace with its own address on
# a private bridge, its own hostname (UTS namespace), /etc/hosts and /tmp (mount namespace), and
# runs its own slurmd; slurmctld and munged run in the root namespace. Needs root.
#
#   slurm-multinode.sh start DIR [N]   start N nodes (default 3; DIR must not hold a running
#                                      cluster); prints the env file
#   slurm-multinode.sh stop DIR        stop daemons, jobs and network of DIR (idempotent)
#   slurm-multinode.sh restart DIR [N] stop, then start
#   slurm-multinode.sh env DIR         print 'export SLURM_CONF=...' for clients
#   slurm-multinode.sh kill DIR NODE   lose NODE as a crash does: SIGKILL every process in it,
#                                      its slurmd included (peers see their connections reset)
#   slurm-multinode.sh cut DIR NODE    lose NODE as a power cut does: its link goes down, its
#                                      processes run on unheard (no FIN, no RST reaches a peer)
#
# DIR must be outside /tmp (each node has a private /tmp); /var/tmp stands in for the shared
# filesystem. Knobs (environment): HPCTRAIN_SLURM_CPUS (per node, default 4: two ranks per node
# with room to spare), HPCTRAIN_SLURM_START_TIMEOUT (seconds, default 90).
set -euo pipefail

die() { echo "slurm-multinode: $*" >&2; exit 1; }
# shellcheck source=scripts/slurm-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm-common.sh"

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }



names() {
  # Network names derived from DIR, so clusters from different directories never collide:
  # bridge hmnXXXXXXbr, host-side veths hmnXXXXXXvI, namespaces hmnXXXXXX-nodeI (IFNAMSIZ is 16).
  local hash
  hash=$(printf '%s' "$1" | md5sum | cut -c1-6)
  tag=hmn$hash
  bridge=${tag}br
}

pick_subnet() {
  # A 10.77.X.0/24 no interface uses, starting from a DIR-derived X.
  local start x i used
  start=$(( 16#${tag:3:2} ))
  used=$(ip -4 -o addr show; ip -4 route show)
  for i in $(seq 0 255); do
    x=$(( (start + i) % 256 ))
    if ! grep -q " 10\.77\.$x\." <<<"$used"; then echo "10.77.$x"; return 0; fi
  done
  die "no free 10.77.X.0/24 subnet"
}

show_logs() {
  local dir=$1 f
  for f in "$dir"/log/slurmctld.log "$dir"/log/slurmd-*.log "$dir"/log/*.stderr; do
    [[ -s $f ]] || continue
    echo "--- $f" >&2; tail -n 20 "$f" >&2 || true
  done
}

start() {
  local dir=$1 n=$2 cpus=${HPCTRAIN_SLURM_CPUS:-4} timeout=${HPCTRAIN_SLURM_START_TIMEOUT:-90}
  if ! [[ $n =~ ^[0-9]+$ ]] || (( n < 1 || n > 200 )); then
    die "node count '$n' is not in 1..200"
  fi
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "HPCTRAIN_SLURM_CPUS='$cpus' is not a positive number"
  (( $(id -u) == 0 )) || die "needs root (network namespaces, bridge, bind mounts)"
  for tool in munged mungekey slurmctld slurmd sinfo scancel ss ip nsenter unshare mount md5sum; do
    command -v "$tool" >/dev/null || die "$tool not found: run scripts/install-deps.sh"
  done
  case $dir/ in
    /tmp/*) die "DIR must be outside /tmp: every node has a private /tmp (use /var/tmp)" ;;
  esac
  [[ ! -e $dir/slurmctld.pid ]] || ! kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null \
    || die "a cluster is already running from $dir"
  # Leftovers of a crashed or half-started cluster from DIR.
  stop "$dir"

  # From here on, any failure tears down what was started.
  trap 'show_logs "$dir"; stop "$dir"
        echo "slurm-multinode: start failed (logs above); stopped what had started" >&2' EXIT
  mkdir -p "$dir"
  chmod 0700 "$dir"
  mkdir -p "$dir"/{state,spool,log,munge,nodes}
  chmod 0700 "$dir/munge"

  start_munge "$dir"

  # Network: a bridge with the controller's address; per node a namespace whose eth0 is one end
  # of a veth pair, the other end on the bridge.
  local subnet host i ns
  subnet=$(pick_subnet)
  host=$(hostname -s)
  echo "SUBNET=$subnet" > "$dir/network"
  ip link add "$bridge" type bridge || die "cannot create bridge $bridge"
  ip addr add "$subnet.1/24" dev "$bridge"
  # Another cluster starting at the same moment may have picked the same subnet.
  [[ $(ip -4 -o addr show | grep -c " ${subnet//./\\.}\\.") -eq 1 ]] \
    || die "subnet $subnet.0/24 was taken meanwhile; start again"
  ip link set "$bridge" up
  {
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    echo "$subnet.1 $host"
    for i in $(seq 1 "$n"); do echo "$subnet.$((i + 1)) node$i"; done
  } > "$dir/hosts"
  for i in $(seq 1 "$n"); do
    ns=$tag-node$i
    ip netns add "$ns" || die "cannot create network namespace $ns"
    ip link add "${tag}v$i" type veth peer name eth0 netns "$ns" \
      || die "cannot create veth ${tag}v$i"
    ip link set "${tag}v$i" master "$bridge" up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    # A fresh /tmp on every start, as after a reboot.
    rm -rf "$dir/nodes/node$i/tmp"
    mkdir -p "$dir/nodes/node$i/tmp"
    chmod 1777 "$dir/nodes/node$i/tmp"
  done

  local ctld_port slurmd_port
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  cat > "$dir/slurm.conf" <<CONF
# Generated by scripts/slurm-multinode.sh for a ${n}-node test cluster; do not edit.
ClusterName=hpctrain-mn
SlurmctldHost=${host}(${subnet}.1)
SlurmctldPort=${ctld_port}
SlurmdPort=${slurmd_port}
$(slurm_common_conf "$dir")
CONF
  for i in $(seq 1 "$n"); do
    echo "NodeName=node$i NodeAddr=$subnet.$((i + 1)) CPUs=$cpus RealMemory=4096 State=UNKNOWN"
  done >> "$dir/slurm.conf"
  echo "PartitionName=debug Nodes=node[1-$n] Default=YES MaxTime=INFINITE State=UP" \
    "OverSubscribe=NO" >> "$dir/slurm.conf"
  : > "$dir/plugstack.conf"
  cat > "$dir/env" <<ENV
export SLURM_CONF='${dir}/slurm.conf'
ENV
  export SLURM_CONF=$dir/slurm.conf

  # Nodes start UNKNOWN, so "idle" below means each slurmd has registered (a saved node state
  # would show the nodes idle before that); the job state, and so the job ids, are kept.
  rm -f "$dir"/state/node_state*
  slurmctld -f "$dir/slurm.conf" -i 2>>"$dir/log/slurmctld.stderr" || die "slurmctld failed"
  # Not 'ip netns exec': it remounts /sys without the cgroup mount and slurmd refuses to start.
  for i in $(seq 1 "$n"); do
    # shellcheck disable=SC2016 # expanded by the inner sh
    nsenter --net="/run/netns/$tag-node$i" unshare --mount --uts --propagation private sh -c '
      set -e
      hostname "$1"
      mount --bind "$2" /etc/hosts
      mount --bind "$3" /tmp
      exec slurmd -f "$4" -N "$1"' \
      sh "node$i" "$dir/hosts" "$dir/nodes/node$i/tmp" "$dir/slurm.conf" \
      2>>"$dir/log/slurmd-node$i.stderr" || die "slurmd on node$i failed"
  done

  all_idle() {
    # Exactly "idle": "idle*" is a node from the saved state whose slurmd has not registered yet.
    [[ $(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle" {print $1}' | sort -u | wc -l) \
       -eq $n ]]
  }
  wait_until "$timeout" all_idle || die "not all $n nodes became idle within ${timeout}s:
$(sinfo -N 2>&1 || true)"
  trap - EXIT
  echo "$dir/env"
}

stop_pidfiles() {
  # stop_pidfiles FILE...: SIGTERM every live pid named in FILEs at once, SIGKILL what is left
  # after 10s, remove the files.
  local f pid pids=() deadline=$(( SECONDS + 10 ))
  for f in "$@"; do
    [[ -f $f ]] || continue
    pid=$(cat "$f" 2>/dev/null || true)
    if [[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null; then pids+=("$pid"); fi
  done
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$@"
}

stop() {
  local dir=$1 ns pids link
  if [[ -f $dir/slurm.conf ]] && [[ -f $dir/slurmctld.pid ]]; then
    # Jobs first, so their slurmstepds do not outlive the daemons.
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --full --user=root >/dev/null 2>&1 || true
  fi
  stop_pidfiles "$dir"/slurmd-*.pid "$dir/slurmctld.pid"
  # Whatever still runs inside this cluster's nodes (slurmstepds, tasks) belongs to it alone.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -x "$tag-node[0-9]*" || true); do
    local deadline=$(( SECONDS + 15 ))
    while pids=$(ip netns pids "$ns" 2>/dev/null) && [[ -n $pids ]]; do
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      (( SECONDS < deadline )) || die "processes $pids in $ns survive SIGKILL"
      sleep 0.2
    done
    ip netns del "$ns" || die "cannot delete network namespace $ns"
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' \
                | grep -x "${tag}v[0-9]*" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  if ip link show "$bridge" >/dev/null 2>&1; then
    ip link del "$bridge" || die "cannot delete bridge $bridge"
  fi
  stop_pidfiles "$dir/munge/munged.pid"
}

node_ns() {
  # node_ns NODE: the namespace of nodeI of this cluster, or die.
  [[ $1 =~ ^node([0-9]+)$ ]] || die "'$1' is not a node name like node2"
  ns=$tag-${1}
  index=${BASH_REMATCH[1]}
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$ns" || die "no node $1 in this cluster"
}

kill_node() {
  local pids deadline=$(( SECONDS + 10 ))
  node_ns "$1"
  # Repeatedly: a dying slurmstepd may still fork. Every process at once, as a crash would.
  while pids=$(ip netns pids "$ns" 2>/dev/null) && [[ -n $pids ]]; do
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    (( SECONDS < deadline )) || die "processes $pids in $ns survive SIGKILL"
    sleep 0.1
  done
}

cut_node() {
  node_ns "$1"
  ip link set "${tag}v$index" down || die "cannot take ${tag}v$index down"
}

cmd=${1:-}
[[ $# -ge 2 ]] || usage
dir=$(realpath -m "$2")
names "$dir"
case $cmd in
  start) [[ $# -le 3 ]] || usage; start "$dir" "${3:-3}" ;;
  stop) [[ $# -eq 2 ]] || usage; stop "$dir" ;;
  restart) [[ $# -le 3 ]] || usage; stop "$dir"; start "$dir" "${3:-3}" ;;
  kill) [[ $# -eq 3 ]] || usage; kill_node "$3" ;;
  cut) [[ $# -eq 3 ]] || usage; cut_node "$3" ;;
  env) [[ $# -eq 2 ]] || usage; [[ -f $dir/env ]] || die "no cluster in $dir"; cat "$dir/env" ;;
  *) usage ;;
esac
