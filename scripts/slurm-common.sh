# Shared by slurm-local.sh and slurm-multinode.sh (sourced; the caller defines die()): free ports,
# deadline waits, and the slurm.conf settings every hpctrain test cluster has.

free_port() {
  # A port nothing listens on (in the root namespace), outside the kernel's ephemeral range.
  local lo hi p
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 10000 ))
    if (( p >= lo && p <= hi )); then continue; fi
    if ! ss -Hltn "sport = :$p" | grep -q .; then echo "$p"; return 0; fi
  done
  die "no free port found"
}

wait_until() {
  # wait_until SECONDS DESCRIPTION COMMAND...: poll COMMAND until it succeeds or the deadline passes.
  local deadline=$(( SECONDS + $1 ))
  shift 2
  until "$@" >/dev/null 2>&1; do
    (( SECONDS < deadline )) || return 1
    sleep 0.5
  done
}

# start_munge DIR: a munged of the cluster's own (key, socket, pid and log under DIR).
start_munge() {
  local dir=$1
  [[ -f $dir/munge/munge.key ]] || mungekey --create --keyfile="$dir/munge/munge.key" >/dev/null
  chmod 0600 "$dir/munge/munge.key"
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" 2>>"$dir/log/munged.log" \
    || die "munged failed to start: $(tail -n 5 "$dir/log/munged.log")"
}

# slurm_common_conf DIR: the settings of every test cluster, all state under DIR: munge through
# DIR's socket (credentials expire after 5 s, so requeued jobs restart soon), pmix, requeue on,
# short KillWait, finished jobs visible to squeue for 10 minutes, no accounting, configured CPUs
# trusted over what the machine has.
slurm_common_conf() {
  local dir=$1
  cat <<CONF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=${dir}/munge/munge.socket,cred_expire=5
CredType=cred/munge
StateSaveLocation=${dir}/state
SlurmdSpoolDir=${dir}/spool/%n
SlurmctldPidFile=${dir}/slurmctld.pid
SlurmdPidFile=${dir}/slurmd-%n.pid
SlurmctldLogFile=${dir}/log/slurmctld.log
SlurmdLogFile=${dir}/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MpiDefault=pmix
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
KillWait=2
MinJobAge=600
InactiveLimit=0
MessageTimeout=20
SlurmctldTimeout=30
SlurmdTimeout=60
Waittime=0
MaxArraySize=1001
PlugStackConfig=${dir}/plugstack.conf
CONF
}
