#!/usr/bin/env bash
# Fails when a tracked C++ file differs from what clang-format (.clang-format) makes of it, or when
# a function is longer than 80 lines (scripts/check-function-length.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' | grep -v '^tests/unit/launcher/golden/')
(( ${#files[@]} )) || exit 0
if ! clang-format --dry-run -Werror "${files[@]}" 2>/tmp/hpctrain-format.$$; then
  grep -E '^[^ ].*error:' /tmp/hpctrain-format.$$ | cut -d: -f1 | sort -u | sed 's/^/  needs clang-format: /' >&2
  rm -f /tmp/hpctrain-format.$$
  echo "check-format: run clang-format -i on the files above" >&2
  exit 1
fi
rm -f /tmp/hpctrain-format.$$
echo "check-format: ${#files[@]} files ok"
scripts/check-function-length.sh
