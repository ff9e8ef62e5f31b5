#!/usr/bin/env bash
# cmake/torch.cmake's NCCL check, for real: configure (only) the project with HPCTRAIN_CUDA=ON and
# HPCTRAIN_NCCL_INCLUDE_DIR at a stand-in nccl.h whose version is torch's with the patch level
# changed (configure must fail, naming both versions and the header's path), at a directory without
# nccl.h (must fail), and at one with torch's version (must pass, and the summary names it).
# Skips (77) without nvcc or without a CUDA torch in PYTHON.
#   nccl_version_check.sh SOURCE_DIR PYTHON CMAKE GENERATOR
set -uo pipefail
src=$1 python=$2 cmake=$3 generator=$4
source "$(dirname "${BASH_SOURCE[0]}")/../../support/expect.sh"

nvcc=${CUDACXX:-$(command -v nvcc || true)}
[[ -z $nvcc && -x /usr/local/cuda/bin/nvcc ]] && nvcc=/usr/local/cuda/bin/nvcc
[[ -n $nvcc && -x $nvcc ]] || { echo "skipped: no nvcc (PATH, CUDACXX, /usr/local/cuda/bin)"; exit 77; }
[[ -n $python ]] || { echo "skipped: no HPCTRAIN_PYTHON"; exit 77; }
version=$("$python" -c 'import torch
assert torch.version.cuda
print(*torch.cuda.nccl.version()[:3])' 2>/dev/null) \
  || { echo "skipped: $python has no CUDA torch with NCCL"; exit 77; }
read -r major minor patch <<<"$version"
echo "torch's NCCL: $major.$minor.$patch; nvcc: $nvcc"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
header() {  # header DIR PATCH: an nccl.h with torch's major and minor and this patch level
  mkdir -p "$1"
  printf '#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n' \
    "$major" "$minor" "$2" > "$1/nccl.h"
}
# configure NAME NCCL_DIR: sets status and out (CMake's wrapped message joined into one line).
configure() {
  out=$("$cmake" -S "$src" -B "$tmp/build-$1" -G "$generator" -DHPCTRAIN_CUDA=ON \
        -DHPCTRAIN_BUILD_TESTS=OFF -DHPCTRAIN_PYTHON="$python" -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DHPCTRAIN_NCCL_INCLUDE_DIR="$2" 2>&1)
  status=$?
  out=$(tr -s ' \n' '  ' <<<"$out")
}
has() { [[ $out == *"$1"* ]] || check_failed "$2: no '$1' in: $out"; }

bad=$((patch + 1))
header "$tmp/other" "$bad"
configure other "$tmp/other"
[[ $status != 0 ]] || check_failed "configure accepted NCCL $major.$minor.$bad headers for torch's $major.$minor.$patch"
has "NCCL version mismatch: $tmp/other/nccl.h is NCCL $major.$minor.$bad" mismatch
has "runs with NCCL $major.$minor.$patch" mismatch
[[ -e $tmp/build-other/build.ninja || -e $tmp/build-other/Makefile ]] \
  && check_failed "mismatch: build files were generated"

mkdir -p "$tmp/empty"
configure empty "$tmp/empty"
[[ $status != 0 ]] || check_failed "configure accepted a directory without nccl.h"
has "no nccl.h in '$tmp/empty'" missing

header "$tmp/same" "$patch"
configure same "$tmp/same"
[[ $status == 0 ]] || check_failed "configure refused NCCL $major.$minor.$patch headers: $out"
has "NCCL $major.$minor.$patch (torch's), headers from $tmp/same" same
finish "ok: NCCL headers at torch's version pass, others fail configure"
