# Sourced by the gpu-labelled tests: where a GPU is present a test that cannot use it FAILS; only
# where none is present does it skip (ctest's SKIP_RETURN_CODE 77). A skip on a GPU machine would
# hide exactly the breakage these tests are for (a CPU build, a driver too old for the wheel).
#   gpu_present          status 0 when `nvidia-smi -L` lists a GPU
#   gpu_require REASON   REASON empty: the GPU is usable, return; otherwise exit 1 with REASON
#                        when a GPU is present, else exit 77
#   keep_logs NAME FILE...
#                        with HPCTRAIN_KEEP_LOGS_DIR set (scripts/gpu-check.sh sets it): copies
#                        each FILE into $HPCTRAIN_KEEP_LOGS_DIR/NAME/, whole up to 1 MiB (a larger
#                        one as its first 64 KiB and last 960 KiB), so that a failed test's rank
#                        logs outlive its temporary directory and ctest's cut of its output

gpu_present() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'
}

gpu_require() {
  [[ -z ${1:-} ]] && return 0
  if gpu_present; then
    echo "FAIL: a GPU is present ($(nvidia-smi -L 2>/dev/null | head -n 1)) but $1"
    exit 1
  fi
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "skipped: nvidia-smi -L lists no GPU ($(nvidia-smi -L 2>&1 | head -n 1)); $1"
  else
    echo "skipped: no GPU (no nvidia-smi); $1"
  fi
  exit 77
}

keep_logs() {
  local dir=${HPCTRAIN_KEEP_LOGS_DIR:-} name=$1 f size
  shift
  [[ -n $dir ]] || return 0
  mkdir -p "$dir/$name" || return 0
  for f in "$@"; do
    [[ -f $f ]] || continue
    size=$(stat -c %s "$f")
    if (( size <= 1048576 )); then
      cp "$f" "$dir/$name/"
    else
      { head -c 65536 "$f"; printf '\n[... %d bytes cut by keep_logs ...]\n' $((size - 1048576))
        tail -c 983040 "$f"; } > "$dir/$name/${f##*/}"
    fi
  done
  echo "logs kept in $dir/$name: $(cd "$dir/$name" && echo *)" >&2
}
