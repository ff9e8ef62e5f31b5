#!/usr/bin/env bash
# Fails when a function in a C++ or Python file of the checkout (tracked, or new and not ignored)
# is longer than 80 lines, from its first line to its last as lizard counts them, unless it is one
# of the declarative tables allowed below. Split a long function into steps instead.
# Then the structure rules of scripts/check_structure.py over the same C++ files: no class holds
# more than 15 fields (compose it of parts), and no component under runtime/ or launcher/supervisor/
# takes or reads the job spec outside its *_from_spec adapter.
# lizard is pinned in scripts/python-requirements.txt, which scripts/install-deps.sh installs into
# .venv; HPCTRAIN_LIZARD names another lizard.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
max_lines=80

# Declarative tables: long because they list one thing per line, with nothing to split into
# steps. Each entry is PATH:FUNCTION, as lizard names the function.
allowed=(
  # The spec's schema: one entry per key with its type, default, limits and help.
  runtime/spec/schema.cpp:hpctrain::spec::make_fields
  # Every spec key once, for each visitor that walks a Spec.
  runtime/spec/keys.hpp:hpctrain::spec::for_each_key
)

lizard=${HPCTRAIN_LIZARD:-.venv/bin/lizard}
if [[ ! -x $lizard ]]; then
  echo "check-function-length: no $lizard: run scripts/install-deps.sh" >&2
  exit 1
fi
files=()
while IFS= read -r f; do
  [[ -f $f ]] && files+=("$f")  # listed by git but deleted in the working tree: skip it
done < <(git ls-files --cached --others --exclude-standard \
           '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh' '*.py' | sort -u)
(( ${#files[@]} )) || exit 0

# Only the length limit: lizard's other limits (complexity, arguments) set out of reach.
status=0
report=$("$lizard" --warnings_only --length "$max_lines" --CCN 1000000 --arguments 1000000 \
           "${files[@]}" 2>&1) || status=$?
long=()
while IFS= read -r line; do
  [[ $line =~ ^([^:]+):([0-9]+):\ warning:\ (.+)\ has\ .*\ ([0-9]+)\ length ]] || continue
  path=${BASH_REMATCH[1]} at=${BASH_REMATCH[2]} name=${BASH_REMATCH[3]} length=${BASH_REMATCH[4]}
  path=${path#./}
  [[ " ${allowed[*]} " == *" $path:$name "* ]] && continue
  long+=("  $path:$at: $name is $length lines")
done <<< "$report"
if (( status != 0 )) && ! grep -q ' warning: ' <<< "$report"; then
  printf '%s\n' "$report" >&2
  echo "check-function-length: lizard failed (exit $status)" >&2
  exit 1
fi
if (( ${#long[@]} )); then
  printf '%s\n' "${long[@]}" >&2
  echo "check-function-length: ${#long[@]} function(s) over $max_lines lines: split them into" \
       "steps (a declarative table goes in the allowlist of scripts/check-function-length.sh)" >&2
  exit 1
fi
echo "check-function-length: ${#files[@]} files, no function over $max_lines lines"
# The Python beside lizard has its module, which check_structure.py uses to find functions.
python=$(dirname "$lizard")/python
[[ -x $python ]] || python=python3
"$python" scripts/check_structure.py "${files[@]}"
