# Sourced by the gpu-labelled tests: where a GPU is present a test that cannot use it FAILS; only
# where none is present does it skip (ctest's SKIP_RETURN_CODE 77). A skip on a GPU machine would
# hide exactly the breakage these tests are for (a CPU build, a driver too old for the wheel).
#   gpu_present          status 0 when `nvidia-smi -L` lists a GPU
#   gpu_require REASON   REASON empty: the GPU is usable, return; otherwise exit 1 with REASON
#                        when a GPU is present, else exit 77

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
