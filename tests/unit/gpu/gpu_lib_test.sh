#!/usr/bin/env bash
# tests/gpu/gpu_lib.sh's branches for real, with a stand-in nvidia-smi on a PATH that holds no
# other (the real one, on a GPU machine, must not decide): a GPU listed and the test cannot run ->
# status 1 and the reason; nvidia-smi absent, listing nothing, or failing -> 77; usable -> the test
# goes on. Then tests/gpu/selftest_nccl.sh with a stand-in worker: backend gloo fails where a GPU
# is listed and skips where none is, backend nccl runs the selftest.
#   gpu_lib_test.sh   (needs jq)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
gpu=$here/../../gpu
source "$here/../../support/expect.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A PATH of only what the scripts need, plus $tmp/smi where a stand-in nvidia-smi may be.
mkdir -p "$tmp/bin" "$tmp/smi"
for tool in jq grep head cat env dirname; do
  p=$(command -v "$tool") || { echo "skipped: no $tool"; exit 77; }
  ln -s "$p" "$tmp/bin/$tool"
done
path=$tmp/smi:$tmp/bin
smi() {  # smi none | gpu | empty | broken: what `nvidia-smi -L` does
  rm -f "$tmp/smi/nvidia-smi"
  case $1 in
    none) return ;;
    gpu) body='echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5f0c6a2e-0000-0000-0000-000000000000)"' ;;
    empty) body='echo "No devices were found"; exit 6' ;;
    broken) body='echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver."; exit 9' ;;
  esac
  printf '#!%s\n[[ $1 == -L ]] || exit 2\n%s\n' "$BASH" "$body" > "$tmp/smi/nvidia-smi"
  chmod +x "$tmp/smi/nvidia-smi"
}
# in_test REASON: a gpu test's shape: source the library, require, then say it went on.
in_test() {
  PATH=$path "$BASH" -c 'source "$1"; gpu_require "$2"; echo "went on"' _ "$gpu/gpu_lib.sh" "$1"
}

smi gpu
expect 1 "^FAIL: a GPU is present \(GPU 0: NVIDIA H100.*\) but the worker is a CPU build$" \
  in_test "the worker is a CPU build"
expect 0 "^went on$" in_test ""
for kind in none empty broken; do
  smi $kind
  expect 77 "^skipped: .*; the worker is a CPU build$" in_test "the worker is a CPU build"
  expect 0 "^went on$" in_test ""
done
smi none
expect 77 "no nvidia-smi" in_test "x"
smi empty
expect 77 "No devices were found" in_test "x"

# selftest_nccl.sh against a stand-in worker whose --describe-env names BACKEND; its --selftest
# prints what a passing NCCL selftest prints, or fails when SELFTEST=fail.
cat > "$tmp/worker" <<EOF
#!$BASH
case \$1 in
  --describe-env) echo "{\"backend\": \"\$BACKEND\", \"cuda_problem\": \"stand-in\"}" ;;
  --selftest) [[ \${SELFTEST:-} == fail ]] && exit 3
              echo "# hpctrain selftest: nccl, 1 ranks"
              echo "# selftest passed: 0 failed checks over 1 ranks" ;;
esac
EOF
chmod +x "$tmp/worker"
selftest() { PATH=$path "$BASH" "$gpu/selftest_nccl.sh" "$tmp/worker"; }
smi gpu
BACKEND=gloo expect 1 "FAIL: a GPU is present .* the worker's backend is gloo, not nccl" selftest
BACKEND=nccl expect 0 "selftest passed" selftest
BACKEND=nccl SELFTEST=fail expect 1 "FAIL: selftest exited 3" selftest
for kind in none empty; do
  smi $kind
  BACKEND=gloo expect 77 "skipped: .*the worker's backend is gloo, not nccl" selftest
done
finish "ok: gpu_lib.sh fails with a GPU listed, skips without, goes on when usable"
