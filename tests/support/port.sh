# Ports for the tests' own listeners (rank 0's rendezvous store, an MLflow server, a stand-in
# slurmd), reserved so that two tests running side by side never take the same one.
#   source port.sh; reserve_port VAR [LO HI]
#
# Drawing a random port nobody listens on is not enough under `ctest -j`: two worker tests once
# drew the same one within the second before either's rank 0 listened, and a rank of one joined
# the other's rendezvous (the worker now refuses another job's store: dist/store_join.hpp).
hpctrain_port_dir=/var/tmp/hpctrain-ports

# reserve_port VAR [LO HI]: sets VAR to a port in LO..HI (default 20000..32000, below the kernel's
# ephemeral range where Gloo's pair listeners and every client socket take theirs) that nothing
# on this machine uses and that no other test holds. The reservation is a lock (flock) on
# $hpctrain_port_dir/PORT through a descriptor this shell keeps open: it lasts until this shell
# and every process it started (they inherit the descriptor) have exited, a test killed included.
# Call it in the test's own shell, not in $(...), whose subshell would drop the lock on return.
# The descriptor is in reserved_port_fd: `exec {reserved_port_fd}>&-` ends the reservation early.
# Returns 1 when 64 draws found no port.
reserve_port() {
  # Locals with names no caller uses: printf -v would set a local of the same name, not the
  # caller's variable.
  local _rp_var=$1 _rp_lo=${2:-20000} _rp_hi=${3:-32000} _rp_port _rp_fd
  mkdir -p "$hpctrain_port_dir" && chmod 1777 "$hpctrain_port_dir" 2> /dev/null
  for _rp_port in $(comm -23 <(seq "$_rp_lo" "$_rp_hi" | sort) \
                  <(ss -Htan | awk '{print $4}' | sed 's/.*://' | sort -u) | shuf -n 64); do
    exec {_rp_fd}>> "$hpctrain_port_dir/$_rp_port" || continue
    if flock -n "$_rp_fd"; then
      # Drawn and locked, but taken meanwhile by a process that is not a test (the lock cannot
      # keep those off): draw again.
      if ss -Htan "sport = :$_rp_port" | grep -q .; then
        exec {_rp_fd}>&-
        continue
      fi
      printf -v "$_rp_var" '%s' "$_rp_port"
      reserved_port_fd=$_rp_fd
      return 0
    fi
    exec {_rp_fd}>&-
  done
  echo "reserve_port: no free port in $_rp_lo..$_rp_hi after 64 draws" >&2
  return 1
}
