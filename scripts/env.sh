# Sourced, not run: `source scripts/env.sh` (bash or zsh). Puts this checkout's built commands
# (hpctrain, hpctrain-worker, hpctrain-data; HPCTRAIN_BUILD_DIR, default build) on PATH and, while
# the local cluster of scripts/slurm-local.sh runs (HPCTRAIN_CLUSTER_DIR, default
# /var/tmp/hpctrain-cluster), points Slurm's commands and hpctrain at it: SLURM_CONF, and
# HPCTRAIN_PROFILE=local (the site profile sbatch/profiles/local.toml, unless a spec or --profile
# names another). Says what it set.
hpctrain_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)
hpctrain_bin=${HPCTRAIN_BUILD_DIR:-build}/bin
[[ $hpctrain_bin == /* ]] || hpctrain_bin=$hpctrain_root/$hpctrain_bin
if [[ ! -x $hpctrain_bin/hpctrain ]]; then
  echo "env.sh: $hpctrain_bin/hpctrain is not built yet: run scripts/demo.sh (or cmake --build)" >&2
else
  case ":$PATH:" in
    *":$hpctrain_bin:"*) ;;
    *) export PATH=$hpctrain_bin:$PATH ;;
  esac
  echo "env.sh: PATH starts with $hpctrain_bin"
fi
hpctrain_cluster=${HPCTRAIN_CLUSTER_DIR:-/var/tmp/hpctrain-cluster}
if [[ -f $hpctrain_cluster/slurmctld.pid ]] &&
   kill -0 "$(cat "$hpctrain_cluster/slurmctld.pid")" 2> /dev/null; then
  export SLURM_CONF=$hpctrain_cluster/slurm.conf HPCTRAIN_PROFILE=local
  echo "env.sh: SLURM_CONF=$SLURM_CONF (the local cluster), HPCTRAIN_PROFILE=local"
else
  echo "env.sh: no local cluster runs in $hpctrain_cluster (scripts/slurm-local.sh start);" \
    "Slurm's commands use the machine's own configuration"
fi
unset hpctrain_root hpctrain_bin hpctrain_cluster
