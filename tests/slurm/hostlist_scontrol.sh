#!/usr/bin/env bash
# expand_hostlist against the live scontrol on a freshly generated random corpus, so a change in
# Slurm's hostlist rules shows up here. The seed is printed; on failure the corpus is kept.
#   hostlist_scontrol.sh GENERATOR DIST_UNIT_TESTS   (SLURM_CONF must point at the test cluster)
set -euo pipefail
generator=$1 tests=$2
: "${SLURM_CONF:?SLURM_CONF must point at a slurm.conf}"
corpus=$(mktemp /tmp/hpctrain-hostlist-corpus.XXXXXX)
python3 "$generator" --count 300 --out "$corpus"
if HPCTRAIN_HOSTLIST_CORPUS=$corpus "$tests" --gtest_filter='HostlistCorpus.*'; then
  rm -f "$corpus"
else
  echo "hostlist_scontrol: mismatch; corpus kept in $corpus" >&2
  exit 1
fi
