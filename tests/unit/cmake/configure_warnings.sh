#!/usr/bin/env bash
# A normal configure prints no warning (issue: the torch wheel's config warned about kineto and
# CMAKE_CUDA_ARCHITECTURES on every configure, which no user can act on). Configures the source
# tree afresh as scripts/test.sh does (torch from the project's venv, CUDA when nvcc is there) and
# fails on any CMake warning, naming it.
#   configure_warnings.sh SOURCE_DIR PYTHON CMAKE GENERATOR
set -uo pipefail
src=$1 python=$2 cmake=$3 generator=$4
source "$(dirname "${BASH_SOURCE[0]}")/../../support/expect.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake" -S "$src" -B "$tmp/build" -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHPCTRAIN_BUILD_TESTS=ON -DHPCTRAIN_PYTHON="$python" > "$tmp/out" 2>&1
status=$?
[[ $status == 0 ]] || check_failed "configure failed ($status): $(tail -n 20 "$tmp/out")"
grep -q "libtorch not found" "$tmp/out" && check_failed "configure did not find torch in $python"
if grep -q "CMake.*Warning" "$tmp/out"; then
  check_failed "configure warned: $(grep -A4 "CMake.*Warning" "$tmp/out")"
fi
finish "ok: a fresh configure prints no warning ($(grep -c '^--' "$tmp/out") status lines)"
