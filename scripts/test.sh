#!/usr/bin/env bash
# Builds hpctrain and runs the whole test suite: unit, integration, slurm (a local Slurm cluster
# this run starts and stops) and gpu (skips itself without CUDA); then the unit tests of the
# torch-free libraries (launcher, spec, data, dist core, preempt, checkpoint, tensorboard) again
# under AddressSanitizer and UndefinedBehaviorSanitizer; beside that pass, the torch-free test
# programs whose code runs threads or children (the loader and the JPEG converter, the checkpoint
# store, the rank's progress, run_command, the stop signals, the step supervisor, the heartbeat and
# the checkpoint commit) under ThreadSanitizer, and the JPEG code against libjpeg's 8 API, as
# Ubuntu ships it (scripts/jpeg8-check.sh; the main build has Debian's 6.2 API); the builds of
# those three run beside the main tests, at the lowest CPU priority. Installs what is missing first.
# The CUDA build (-DHPCTRAIN_CUDA=ON) is compiled wherever nvcc is found (CUDACXX, PATH, then
# $CUDA_HOME/bin, default /usr/local/cuda/bin), so the GPU code compiles in CI even without a GPU;
# with CI=true a missing nvcc is an error, elsewhere it is a CPU build.
#   HPCTRAIN_BUILD_DIR   build directory (default: build)
#   HPCTRAIN_SANITIZE=0  skip the ASan+UBSan pass (build-asan)
#   HPCTRAIN_TSAN=0      skip the ThreadSanitizer pass (build-tsan)
#   HPCTRAIN_JPEG8=0     skip the libjpeg 8 API build (build-jpeg8)
set -euo pipefail
# A shell that sourced scripts/env.sh names the local cluster's profile for every hpctrain command;
# the tests choose their own.
unset HPCTRAIN_PROFILE
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc)
started=$SECONDS
step() { printf '\n==> %s (%ds)\n' "$*" $((SECONDS - started)); }

# failed_tests_tail BUILD: the end of each failed test's output again, after ctest's summary, so a
# log read from its end (CI's) shows why the tests failed.
failed_tests_tail() {
  local dir=$1/Testing/Temporary name
  [[ -f $dir/LastTestsFailed.log ]] || return 0
  while IFS=: read -r _ name; do
    printf '\n==> output of failed test %s (its last 40 lines)\n' "$name"
    awk -v t="$name" '
      $0 ~ "^[0-9]+/[0-9]+ Test: " && $3 == t { found = 1; next }
      found && !inside && /^-+$/ { inside = 1; next }
      inside && /^<end of output>$/ { exit }
      inside' "$dir/LastTest.log" | tail -n 40
  done < "$dir/LastTestsFailed.log"
}

step "dependencies"
scripts/install-deps.sh

step "format"
scripts/check-format.sh

nvcc=${CUDACXX:-$(command -v nvcc || true)}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
[[ -z $nvcc && -x $cuda_home/bin/nvcc ]] && nvcc=$cuda_home/bin/nvcc
if [[ -n $nvcc ]]; then
  cuda=(-DHPCTRAIN_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc")
elif [[ ${CI:-} == true ]]; then
  echo "test.sh: CI=true and no nvcc (CUDACXX, PATH, $cuda_home/bin): CI compiles the CUDA" \
       "build (-DHPCTRAIN_CUDA=ON); install the CUDA toolkit or set CUDACXX" >&2
  exit 1
else
  echo "test.sh: no nvcc (CUDACXX, PATH, $cuda_home/bin): a CPU build" >&2
  cuda=(-DHPCTRAIN_CUDA=AUTO)
fi

build=${HPCTRAIN_BUILD_DIR:-build}
step "configure and build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHPCTRAIN_BUILD_TESTS=ON \
  "${cuda[@]}"
cmake --build "$build" -j "$jobs"

# The later passes' builds (ASan+UBSan, ThreadSanitizer, libjpeg 8 API) run beside the main tests
# at the lowest CPU priority: those tests wait on Slurm, on peers and on sleeps for much of their
# time, and the builds take that idle CPU instead of adding their minutes after the tests (nice 19
# in the same session, so a test that wants a core gets it). Their output goes to a log, printed
# if they fail.
side_builds() {
  renice -n 19 -p "$BASHPID" >/dev/null
  if [[ ${HPCTRAIN_SANITIZE:-1} != 0 ]]; then
    step "build-asan"
    # The torch-free parts (launcher, spec, data, launch environment, signals, checkpoint store,
    # TensorBoard event files): libtorch's wheel is not built with the sanitizers.
    cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHPCTRAIN_SANITIZE=ON \
      -DHPCTRAIN_BUILD_TESTS=ON -DHPCTRAIN_RUNTIME=OFF >/dev/null
    cmake --build build-asan -j "$jobs"
  fi
  if [[ ${HPCTRAIN_TSAN:-1} != 0 ]]; then
    # Only the test files whose code runs threads, children or signal handlers
    # (hpctrain_tsan_test in tests/CMakeLists.txt; label tsan), each program run whole: building
    # the rest again costs minutes.
    step "build-tsan"
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHPCTRAIN_TSAN=ON \
      -DHPCTRAIN_BUILD_TESTS=ON -DHPCTRAIN_RUNTIME=OFF >/dev/null
    cmake --build build-tsan -j "$jobs" --target hpctrain_tsan_tests
  fi
  if [[ ${HPCTRAIN_JPEG8:-1} != 0 ]]; then
    step "build-jpeg8"
    scripts/jpeg8-check.sh build
  fi
  step "side builds done"
}
side_log=$build/side-builds.log
set -m  # the side builds in a process group of their own, to stop them whole if the tests fail
side_builds >"$side_log" 2>&1 &
side_pid=$!
set +m
stop_side_builds() { kill -TERM -- "-$side_pid" 2>/dev/null || true; wait "$side_pid" 2>/dev/null || true; }

step "tests (the later passes' builds beside them: $side_log)"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 900 || {
  status=$?
  stop_side_builds
  failed_tests_tail "$build"
  exit "$status"
}

step "waiting for the later passes' builds"
if ! wait "$side_pid"; then
  echo "test.sh: the later passes' builds failed; the end of $side_log:" >&2
  tail -n 60 "$side_log" >&2
  exit 1
fi
grep '^==>' "$side_log" | sed 's/^==>/  built:/'

# The ThreadSanitizer and libjpeg 8 passes run beside the ASan+UBSan one, whose time is mostly
# the step supervisor's tests waiting on their stand-in steps; each writes a log, printed when it
# ends (whole if it failed).
tsan_pass() {
  # A report makes the program exit non-zero (TSan's exitcode), so the test fails.
  TSAN_OPTIONS=second_deadlock_stack=1 \
    ctest --test-dir build-tsan --output-on-failure -j "$jobs" -L tsan || {
    local status=$?
    failed_tests_tail build-tsan
    return "$status"
  }
}
jpeg8_pass() {
  scripts/jpeg8-check.sh test || {
    local status=$?
    failed_tests_tail "${HPCTRAIN_JPEG8_BUILD_DIR:-build-jpeg8}"
    return "$status"
  }
}
beside_pids=() beside_what=()
beside() {  # beside WHAT LOG FUNCTION: FUNCTION in the background (its own process group)
  set -m
  "$3" >"$2" 2>&1 &
  beside_pids+=($!) beside_what+=("$1|$2")
  set +m
}
stop_beside() { local p; for p in "${beside_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done; wait; }
if [[ ${HPCTRAIN_TSAN:-1} != 0 ]]; then
  step "threaded torch-free tests under ThreadSanitizer (build-tsan), beside the next pass"
  beside "threaded torch-free tests under ThreadSanitizer (build-tsan)" "$build/tsan-pass.log" tsan_pass
fi
if [[ ${HPCTRAIN_JPEG8:-1} != 0 ]]; then
  step "JPEG code against the libjpeg 8 API (build-jpeg8), beside the next pass"
  beside "JPEG code against the libjpeg 8 API (build-jpeg8)" "$build/jpeg8-pass.log" jpeg8_pass
fi

if [[ ${HPCTRAIN_SANITIZE:-1} != 0 ]]; then
  step "torch-free unit tests under ASan+UBSan (build-asan)"
  # Twice the cores: most of this pass's time is the step supervisor's tests waiting on their
  # stand-in steps. The checks of the build and the scripts (build_check) test no compiled code.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -j $((2 * jobs)) -L unit -LE build_check || {
    status=$?
    stop_beside
    failed_tests_tail build-asan
    exit "$status"
  }
fi

beside_failed=0
for i in "${!beside_pids[@]}"; do
  IFS='|' read -r what log <<<"${beside_what[$i]}"
  if wait "${beside_pids[$i]}"; then
    step "$what: passed"
    grep -E 'tests passed|Total Test time|jpeg8-check: passed' "$log" || true
  else
    step "$what: FAILED (its log, $log)"
    cat "$log"
    beside_failed=1
  fi
done
(( beside_failed == 0 )) || exit 1
step "all tests passed"
