#!/usr/bin/env bash
# On a machine with a GPU and a CUDA build: hpctrain-worker --selftest passes with the NCCL backend
# at world size 1. Skips (status 77) where no GPU is present; FAILS where one is present but the
# worker's backend is not NCCL (a CPU build, or CUDA unusable: tests/gpu/gpu_lib.sh).
set -uo pipefail
worker=$1
source "$(dirname "${BASH_SOURCE[0]}")/gpu_lib.sh" || exit 1
describe='' out=''
keep_on_failure() {  # the whole output, not ctest's cut of it (keep_logs, gpu_lib.sh)
  local status=$? tmp
  (( status == 0 || status == 77 )) && return
  tmp=$(mktemp -d) || return
  printf '%s\n' "$describe" > "$tmp/describe-env.txt"
  printf '%s\n' "$out" > "$tmp/selftest.log"
  keep_logs gpu_selftest_nccl "$tmp/describe-env.txt" "$tmp/selftest.log"
  rm -rf "$tmp"
}
trap keep_on_failure EXIT
describe=$("$worker" --describe-env 2>&1) || { echo "describe-env failed: $describe"; exit 1; }
backend=$(jq -r .backend <<<"$describe")
[[ $backend == nccl ]] || gpu_require "the worker's backend is $backend, not nccl: $describe"
out=$("$worker" --selftest --selftest-max-bytes $((256 << 20)) 2>&1)
status=$?
echo "$out"
[[ $status == 0 ]] || { echo "FAIL: selftest exited $status"; exit 1; }
grep -q "^# hpctrain selftest: nccl, 1 ranks" <<<"$out" || { echo "FAIL: not the NCCL backend"; exit 1; }
grep -q "^# selftest passed: 0 failed checks over 1 ranks" <<<"$out" || { echo "FAIL: no pass line"; exit 1; }
