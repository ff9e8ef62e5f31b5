#!/usr/bin/env bash
# The GPU checks, in one command, for a machine with an NVIDIA GPU (../shared/gpu/README.md):
# build the CUDA build, run the gpu-labelled tests, and run the GPU training benchmark
# (bench/train/gpu.sh's default rows: the graphs table, ResNet-20 and ResNet-50 in fp16 and bf16,
# ours with CUDA graphs against torch.compile default and reduce-overhead, whose compiles are made
# ahead in the background while it builds and tests; then the JPEG row). GRAPHS_VS ("default
# reduce-overhead" here) sets the graphs table's sides; what a budget cut left out, or else the
# other sides (ours and PyTorch eager), in a second call: `scripts/gpu-check.sh bench`.
#
#   scripts/gpu-check.sh prepare   here, with a package registry: download the Debian packages a
#                                  bare GPU image lacks (below) into .gpu-debs/ (git-ignored)
#   scripts/gpu-check.sh run       on the GPU machine: unpack .gpu-debs/ under /tmp (never into /),
#                                  configure with HPCTRAIN_CUDA=ON against python3's torch, build
#                                  what the gpu tests and the benchmark run, test, benchmark; logs
#                                  under $OUT (or ./gpu-check-out) whichever step fails, and a
#                                  non-zero status when one did. At most 7 files there (the device
#                                  tool returns 8): summary.txt (each step's status and seconds,
#                                  written as it goes), build.log, ctest.log, ctest-LastTest.log,
#                                  gpu-test-logs.tgz (a failed gpu test's rank logs, whole),
#                                  bench.md (the tables), bench.log (what the runs printed). The
#                                  benchmark gets what is left of GPU_CHECK_BUDGET_S (540) and is
#                                  stopped there; the test logs land before it starts.
#   scripts/gpu-check.sh bench     on the GPU machine after run (a second call, warm): the
#                                  benchmark alone, ROWS, GRAPHS_VS and COMPILE_MODES as
#                                  bench/train/gpu.sh's; without ROWS, the rows the calls before
#                                  left out when the budget cut them, or when none was, the
#                                  graphs table's eager sides
#   scripts/gpu-check.sh bench-rows  what bench would run: ROWS="..." GRAPHS_VS="..."
#   scripts/gpu-check.sh           prepare, then run when nvidia-smi sees a GPU; without one it
#                                  checks the package list: every library the build links and
#                                  every program it runs from the packages finds what it needs in
#                                  them (or in glibc and GCC's runtime, which every image has), and
#                                  a configure that sees no package outside them succeeds
#
# With the device tool: `scripts/gpu-check.sh prepare` here, then run(command="scripts/gpu-check.sh
# run", carry=[".gpu-debs"], timeout_s=600). prepare also copies Fashion-MNIST's training set
# (Debian's dataset-fashion-mnist) into .gpu-debs/fashion-mnist: the benchmark's JPEG row makes
# its images from it, and the GPU image lacks it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
debs=$root/.gpu-debs
prefix=/tmp/hpctrain-gpu-deps
out=${OUT:-$root/gpu-check-out}
log() { printf 'gpu-check: %s\n' "$*" >&2; }

# What the build, the gpu tests and the benchmark need that a GPU image (CUDA with nvcc, CMake,
# ninja, a compiler, python3 with torch) may lack: each package the build uses (CMakeLists.txt's
# find_package, pkg_check_modules, find_path) and the shared libraries those load, down to glibc
# and GCC's runtime (libstdc++, libgcc_s). Debian bookworm's; `auto` checks the list is whole.
packages=(
  pkgconf pkgconf-bin libpkgconf3                 # pkg_check_modules
  jq libjq1 libonig5                              # the gpu tests and bench/train/gpu.sh
  libtoml11-dev libcli11-dev nlohmann-json3-dev   # the launcher (header-only)
  libgloo-dev                                     # headers c10d's ProcessGroupGloo.hpp includes
  libgtest-dev                                    # the tests (static libraries)
  libstb-dev libstb0 zlib1g-dev zlib1g            # the converters
  libjpeg62-turbo-dev libjpeg62-turbo             # JPEG samples (runtime/data/jpeg.cpp)
  libxxhash-dev libxxhash0                        # checkpoint checksums
  libprotobuf-dev libprotobuf32 protobuf-compiler libprotoc32  # TensorBoard's event files
  libisal-dev libisal2                            # CRC32C for TensorBoard's records
  libpmix-dev libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libudev1 libmunge2
  libhdf5-dev libhdf5-103-1 libsz2 libaec0        # the data files
  # libhdf5_serial.so.103 loads libcurl (HDF5's read-only S3 driver), and libcurl its TLS,
  # Kerberos, LDAP, IDN and compression libraries.
  libcurl4 libnghttp2-14 libidn2-0 libunistring2 librtmp1 libssh2-1 libpsl5 libssl3 libzstd1
  libbrotli1 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
  libldap-2.5-0 libsasl2-2 libgnutls30 libhogweed6 libnettle8 libgmp10 libp11-kit0 libffi8
  libtasn1-6
)
# Shared libraries every image has (glibc, GCC's runtime): never shipped, so never shadowed.
base_sonames='^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
libdirs=(usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu/hdf5/serial
         usr/lib/x86_64-linux-gnu/pmix2/lib)

prepare() {
  mkdir -p "$debs"
  grep -qx '/.gpu-debs/' .gitignore 2>/dev/null || log "note: .gpu-debs/ should be git-ignored"
  rm -f "$debs"/*.deb
  (cd "$debs" && apt-get download "${packages[@]}" >/dev/null)
  local fashion=/usr/share/datasets/fashion-mnist
  [[ -f $fashion/train-images-idx3-ubyte.gz ]] \
    || { log "no $fashion: install dataset-fashion-mnist (scripts/install-deps.sh)"; return 1; }
  mkdir -p "$debs/fashion-mnist"
  cp "$fashion"/train-{images-idx3,labels-idx1}-ubyte.gz "$debs/fashion-mnist/"
  log "downloaded $(ls "$debs"/*.deb | wc -l) packages, copied Fashion-MNIST's training set" \
      "($(du -sh "$debs" | cut -f1) in all) into $debs"
}

unpack() {
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
  # Links to absolute paths (zlib1g-dev's libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13) point
  # into the image, which has other versions: point them at the prefix's copy instead.
  local link
  while IFS= read -r -d '' link; do
    ln -sfn "$prefix$(readlink "$link")" "$link"
  done < <(find "$prefix" -type l -lname '/*' -print0)
  # pkg-config sees only the prefix's .pc files, and the sysroot maps the /usr they name to it.
  export PKG_CONFIG_LIBDIR=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
  unset PKG_CONFIG_PATH
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  # Debian's libjpeg.pc names /usr/include alone: there jconfig.h's multiarch directory is a
  # system include directory. Under the sysroot it is not, so jpeglib.h's #include "jconfig.h"
  # would reach the image's own (Ubuntu's libjpeg-turbo8: JPEG_LIB_VERSION 80) through the system
  # directories: 8 API headers over our 62 library, an ABI mismatch (the first GPU build broke on
  # it). Name the prefix's multiarch directory first. jpeg_check verifies what the build read.
  local pc=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig/libjpeg.pc
  # shellcheck disable=SC2016  # ${includedir} is pkg-config's variable
  sed -i 's|^Cflags: -I${includedir}$|Cflags: -I${includedir}/x86_64-linux-gnu -I${includedir}|' "$pc"
  # shellcheck disable=SC2016
  grep -q '^Cflags: -I${includedir}/x86_64-linux-gnu ' "$pc" \
    || { log "$pc: unexpected Cflags: $(grep '^Cflags' "$pc")"; return 1; }
  # The image's own libraries first (its LD_LIBRARY_PATH, say for the driver, then its system
  # directories); the prefix's only fill in what it lacks, for protoc, jq, the linker and the tests.
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu$(printf ":$prefix/%s" "${libdirs[@]}")
  export PATH=$PATH:$prefix/usr/bin
  export CMAKE_PREFIX_PATH=$prefix/usr
}

configure() {  # configure BUILD_DIR CUDA(ON|OFF) [CMAKE_ARGS...]
  local dir=$1 cuda=$2
  shift 2
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHPCTRAIN_BUILD_TESTS=ON \
    -DHPCTRAIN_CUDA="$cuda" -DHPCTRAIN_PYTHON="${HPCTRAIN_PYTHON:-$(command -v python3)}" \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DPKG_CONFIG_EXECUTABLE="$prefix/usr/bin/pkgconf" "$@"
}

# closure FILE...: the shared libraries each FILE needs, recursively, must be in the prefix or be
# glibc's or GCC's; prints what is missing, with who needs it. Status 1 when something is.
closure() {
  local -A seen=()
  local queue=("$@") missing=0 file soname dir found
  while (( ${#queue[@]} )); do
    file=${queue[0]}
    queue=("${queue[@]:1}")
    [[ -n ${seen[$file]:-} ]] && continue
    seen[$file]=1
    [[ -e $file ]] || { echo "missing: $file"; missing=1; continue; }
    while read -r soname; do
      [[ $soname =~ $base_sonames ]] && continue
      found=
      for dir in "${libdirs[@]}"; do
        [[ -e $prefix/$dir/$soname ]] && { found=$prefix/$dir/$soname; break; }
      done
      if [[ -n $found ]]; then queue+=("$(readlink -f "$found")"); else
        echo "missing: $soname (needed by ${file#"$prefix"/})"; missing=1
      fi
    done < <(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  return "$missing"
}

# jpeg_check BUILD_DIR: every object built so far that includes jpeglib.h read the prefix's
# jconfig.h (ninja's dependency log says which file each object read); status 1 otherwise, or
# when no such object was built.
jpeg_check() {
  local dir=$1 want=$prefix/usr/include/x86_64-linux-gnu/jconfig.h obj got n=0 bad=0
  local -a objs
  mapfile -t objs < <(jpeg_objects "$dir")
  for obj in "${objs[@]}"; do
    got=$(ninja -C "$dir" -t deps "$obj" 2>/dev/null | grep -E '/jconfig\.h$' | tr -d ' ' || true)
    [[ -n $got ]] || continue
    n=$((n + 1))
    [[ $got == "$want" ]] || { log "$obj read $got, not $want"; bad=1; }
  done
  (( n )) || { log "no object that includes jpeglib.h was built in $dir"; return 1; }
  (( bad )) && return 1
  log "ok: the $n objects that include jpeglib.h read $want"
}
jpeg_objects() {  # the objects of the sources that include jpeglib.h (runtime/data, datasets)
  ninja -C "$1" -t targets all | sed -n 's/^\([^:]*\/jpeg\(_codec\)\{0,1\}\.cpp\.o\): .*/\1/p'
}

# check: the package list is whole. A configure (CPU or, with nvcc here, CUDA) that finds nothing
# under /usr but the compiler (CMAKE_IGNORE_PREFIX_PATH; pkg-config sees the prefix alone), then
# the closure of every library it links from the prefix and of the programs the build runs. And
# the image's jconfig.h (JPEG_LIB_VERSION 80, found through the system include directories)
# cannot win over the prefix's: a jconfig.h that is an #error, on an -isystem directory (searched
# after -I and the targets' own -isystem directories, before /usr/include/x86_64-linux-gnu, where
# the image's lies), and the objects that include jpeglib.h are compiled.
check() {
  local dir=/tmp/hpctrain-gpu-check-configure cuda=OFF python=python3 libs
  local fake=/tmp/hpctrain-gpu-check-image-include
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] && cuda=ON
  [[ -x $root/.venv/bin/python ]] && python=$root/.venv/bin/python
  rm -rf "$dir" "$fake"
  mkdir -p "$fake"
  echo '#error "the image'"'"'s jconfig.h (JPEG_LIB_VERSION 80) was read, not the prefix'"'"'s"' \
    > "$fake/jconfig.h"
  HPCTRAIN_PYTHON=$python configure "$dir" "$cuda" -DCMAKE_IGNORE_PREFIX_PATH="/usr;/" \
    -DCMAKE_CXX_FLAGS="-isystem $fake" \
    > "$dir.log" 2>&1 || { tail -n 30 "$dir.log"; log "configure failed: $dir.log"; return 1; }
  grep -q 'torch=none' "$dir.log" \
    && { log "configure found no torch ($python): the runtime (PMIx, gloo) went unchecked"; return 1; }
  mapfile -t libs < <(grep -Eho "$prefix/[^ ]*\.(so[.0-9]*|a)( |$)" "$dir/build.ninja" | sed "s/ $//" | sort -u)
  (( ${#libs[@]} )) || { log "the build links nothing from $prefix"; return 1; }
  closure "${libs[@]}" "$prefix/usr/bin/protoc" "$prefix/usr/bin/jq" "$prefix/usr/bin/pkgconf" \
    || { log "the package list lacks the libraries above"; return 1; }
  log "ok: configure ($cuda CUDA, $python) sees only the prefix's packages; the ${#libs[@]}" \
      "libraries it links and protoc, jq and pkgconf need nothing outside them and glibc/GCC"
  local -a objs
  mapfile -t objs < <(jpeg_objects "$dir")
  (( ${#objs[@]} )) || { log "no jpeg objects in $dir/build.ninja"; return 1; }
  ninja -C "$dir" "${objs[@]}" > "$dir.jpeg.log" 2>&1 \
    || { tail -n 30 "$dir.jpeg.log"; log "the objects including jpeglib.h did not compile"; return 1; }
  jpeg_check "$dir"
}

out_files=(summary.txt build.log ctest.log ctest-LastTest.log gpu-test-logs.tgz bench.md bench.log)
start=$SECONDS
budget=${GPU_CHECK_BUDGET_S:-540}
# note LINE...: one line of $out/summary.txt, written at once (a run cut off keeps what it had).
note() { printf '%s\n' "$*" >> "$out/summary.txt"; }

# step NAME LOG CMD...: CMD's output to the terminal and appended to $out/LOG; its status and
# seconds to summary.txt. A failure is recorded in failed, and the status returned, but nothing
# stops: the logs of every step land under $out.
failed=()
step() {
  local name=$1 file=$out/$2 status t0=$SECONDS
  shift 2
  log "$name: $*"
  set +e
  "$@" 2>&1 | tee -a "$file"
  status=${PIPESTATUS[0]}
  set -e
  note "$name: status $status, $((SECONDS - t0)) s (at $((SECONDS - start)) s)"
  (( status == 0 )) || { log "$name failed (status $status), log: $file"; failed+=("$name"); }
  return "$status"
}

# cap FILE: a file over 1 MiB becomes its first 64 KiB and last 960 KiB.
cap() {
  local size
  [[ -f $1 ]] || return 0
  size=$(stat -c %s "$1")
  (( size > 1048576 )) || return 0
  { head -c 65536 "$1"; printf '\n[... %d bytes cut by gpu-check.sh ...]\n' $((size - 1048576))
    tail -c 983040 "$1"; } > "$1.cap" && mv "$1.cap" "$1"
}

# keep_test_logs STAMP: the logs the failed gpu tests kept (tests/gpu/gpu_lib.sh's keep_logs,
# under HPCTRAIN_KEEP_LOGS_DIR), and the rank logs of any test work directory left behind since
# STAMP (a test killed by ctest's timeout runs no exit trap), into $out/gpu-test-logs.tgz.
keep_test_logs() {
  local keep=$HPCTRAIN_KEEP_LOGS_DIR d f
  while IFS= read -r -d '' d; do
    mkdir -p "$keep/left-${d##*/}"
    for f in "$d"/*.log.rank* "$d"/*.toml; do
      [[ -f $f ]] && cp "$f" "$keep/left-${d##*/}/"
    done
  done < <(find /var/tmp -maxdepth 1 -name 'hpctrain-resume.*' -newer "$1" -print0 2>/dev/null)
  while IFS= read -r -d '' f; do cap "$f"; done < <(find "$keep" -type f -print0)
  if [[ -n $(ls -A "$keep") ]]; then
    tar -czf "$out/gpu-test-logs.tgz" -C "${keep%/*}" "${keep##*/}"
    note "gpu-test-logs.tgz: $(find "$keep" -type f | sed "s|^$keep/||" | tr '\n' ' ')"
  fi
}

run() {
  [[ -d $debs ]] || { log "no $debs: run 'scripts/gpu-check.sh prepare' where apt works"; exit 1; }
  nvidia-smi > /dev/null 2>&1 || { log "no GPU (nvidia-smi fails)"; exit 77; }
  mkdir -p "$out"
  rm -f "${out_files[@]/#/$out/}" "$rows_done"
  note "gpu-check.sh run: $(git -C "$root" log -1 --format='%h %s' 2>/dev/null | cut -c1-100)," \
       "$(date -u '+%F %T') UTC, $(nproc) cores, budget ${budget} s"
  nvidia-smi >> "$out/summary.txt" 2>&1
  local jobs build_ok=
  jobs=$(nproc)
  local t0=$SECONDS
  unpack >> "$out/build.log" 2>&1   # not in step's pipeline: its exports must stay in this shell
  note "unpack: $((SECONDS - t0)) s"
  start_prewarm
  # The worker, the converter (the benchmark's data) and every program of tests/gpu (gpu_fused_bn's:
  # a test whose program was not built is "Not Run", a failure).
  if step configure build.log configure build-gpu ON \
     && step build build.log cmake --build build-gpu -j "$jobs" \
          --target hpctrain-worker hpctrain-data tests/gpu/all
  then
    build_ok=1
    step jpeg-headers build.log jpeg_check build-gpu || true
  fi
  cap "$out/build.log"
  [[ -n $build_ok ]] || { finish; return; }

  # The JPEG row's data in the background while the gpu tests run (they are small GPU jobs).
  local jpeg_dir=/tmp/hpctrain-gpu-jpeg jpeg_pid='' rows=${ROWS:-}
  if [[ -f $debs/fashion-mnist/train-images-idx3-ubyte.gz ]]; then
    FASHION_DIR=$debs/fashion-mnist PROCS=8 bench/train/jpeg_data.sh build-gpu "$jpeg_dir" \
      > "$out/bench.log" 2>&1 &
    jpeg_pid=$!
  else
    log "no $debs/fashion-mnist (an older prepare): the benchmark leaves its jpeg row out"
    note "jpeg data: no $debs/fashion-mnist, jpeg row left out"
    rows=${rows:-graphs}
  fi

  export HPCTRAIN_KEEP_LOGS_DIR=/tmp/hpctrain-gpu-test-logs
  rm -rf "$HPCTRAIN_KEEP_LOGS_DIR"
  mkdir -p "$HPCTRAIN_KEEP_LOGS_DIR"
  local stamp=/tmp/hpctrain-gpu-check.stamp
  touch "$stamp"
  # Every gpu test is stopped by then (measured: 42 s for the five together). First three at a
  # time, those that only check their own run; then one by one those that compare runs with each
  # other (label gpu_serial, tests/gpu/CMakeLists.txt: cuDNN's autotuner times its candidates, and
  # another test's work could make two runs pick different kernels; the prewarm's GPU work is 4
  # steps a model, precision and mode, most of it done during the build).
  local stop_time
  stop_time=$(date -d "+${CTEST_BUDGET_S:-240} sec" +%H:%M:%S)
  : > "$out/ctest-LastTest.log"
  step ctest ctest.log ctest --test-dir build-gpu -L gpu -LE gpu_serial -j 3 --output-on-failure \
    --stop-time "$stop_time" || true
  cat build-gpu/Testing/Temporary/LastTest.log >> "$out/ctest-LastTest.log" 2>/dev/null \
    || log "no build-gpu/Testing/Temporary/LastTest.log"
  step ctest-serial ctest.log ctest --test-dir build-gpu -L gpu_serial --output-on-failure \
    --stop-time "$stop_time" || true
  cat build-gpu/Testing/Temporary/LastTest.log >> "$out/ctest-LastTest.log" 2>/dev/null \
    || log "no build-gpu/Testing/Temporary/LastTest.log"
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "$out/ctest.log" | sed 's/^ */  /' >> "$out/summary.txt" || true
  keep_test_logs "$stamp"
  cap "$out/ctest.log"
  cap "$out/ctest-LastTest.log"

  if [[ -n $jpeg_pid ]]; then
    t0=$SECONDS
    if wait "$jpeg_pid"; then
      note "$(tail -n 1 "$out/bench.log") (waited $((SECONDS - t0)) s after the tests)"
      export JPEG_DIR=$jpeg_dir
    else
      note "jpeg data: failed (bench.log); jpeg row left out"
      failed+=(jpeg-data)
      rows=${rows:-graphs}
    fi
  fi
  finish_prewarm
  local left=$(( budget - (SECONDS - start) ))
  if (( left < 60 )); then
    note "bench: skipped, $left s of the budget left"
    failed+=(bench-skipped)
  else
    # The tables to bench.md, row by row; what the runs print to bench.log; each part's seconds
    # to summary.txt. timeout signals gpu.sh's whole process group (the worker, the peers).
    log "bench: bench/train/gpu.sh build-gpu (stopped after $left s)"
    t0=$SECONDS
    local status=0
    # The graphs table against what the GPU acceptance asks of it (torch.compile's two modes):
    # the other sides in a second call (header).
    TIMES=$out/summary.txt ROWS=$rows GRAPHS_VS=${GRAPHS_VS:-$acceptance_sides} \
      ROWS_DONE=$rows_done timeout -k 10 "$left" bench/train/gpu.sh build-gpu \
      > "$out/bench.md" 2>> "$out/bench.log" || status=$?
    note "bench: status $status$( ((status == 124)) && echo ' (stopped at the budget)'), $((SECONDS - t0)) s (at $((SECONDS - start)) s)"
    (( status == 0 )) || failed+=(bench)
  fi
  finish
}

# The graphs table's peer compiled ahead (bench/train/gpu.sh --prewarm), in the background from
# the start: it needs only python3's torch, and is compilation on the CPU beside the build and the
# tests (four chains side by side), with 4 GPU steps a model, precision and mode. The table then
# times the peer's warm start on those caches, the cold figure beside it (the H100's cold
# processes: ResNet-20 37 s, ResNet-50 63 s, each model, precision and mode).
peer_cache=/tmp/hpctrain-peer-cache
prewarm_pid=
prewarm_log=/tmp/hpctrain-prewarm.log
start_prewarm() {
  [[ -z ${ROWS:-} || $ROWS == *graphs* ]] || return 0
  rm -rf "$peer_cache"
  # Its own process group, so that a budget cut ends its compile workers with it. Its last line
  # says when it ended.
  setsid bash -c 'bench/train/gpu.sh --prewarm "$1"; s=$?; echo "prewarm ended: status $s, $SECONDS s"
                  exit "$s"' prewarm "$peer_cache" > "$prewarm_log" 2>&1 &
  prewarm_pid=$!
  note "prewarm: started at $((SECONDS - start)) s"
}
# finish_prewarm: waits for it (while 60 s of the budget are left after), then its log to bench.log
# and PEER_CACHE for the benchmark.
finish_prewarm() {
  [[ -n $prewarm_pid ]] || return 0
  local t0=$SECONDS status=0 ended=0
  while kill -0 "$prewarm_pid" 2> /dev/null && (( budget - (SECONDS - start) > 60 )); do
    sleep 1
  done
  if kill -0 "$prewarm_pid" 2> /dev/null; then
    kill -- "-$prewarm_pid" 2> /dev/null || true
    status=124
  fi
  wait "$prewarm_pid" || ended=$?
  (( status == 124 )) || status=$ended
  note "prewarm: status $status$( ((status == 124)) && echo ' (stopped at the budget)');" \
       "$(grep -oE '[0-9]+ s$' <(grep '^prewarm ended' "$prewarm_log") || echo '? s'), waited" \
       "$((SECONDS - t0)) s for it after the tests; cold warm-up s:" \
       "$(tr '\n' ';' < "$peer_cache/cold.txt" 2> /dev/null)"
  cat "$prewarm_log" >> "$out/bench.log"
  export PEER_CACHE=$peer_cache
  prewarm_pid=
}

finish() {
  local f
  if [[ -n $prewarm_pid ]]; then
    kill -- "-$prewarm_pid" 2> /dev/null || true
  fi
  for f in "$out"/*; do [[ $f == *.tgz ]] || cap "$f"; done
  note "total: $((SECONDS - start)) s; failed: ${failed[*]:-none}"
  echo "=== $out/summary.txt"
  cat "$out/summary.txt"
  [[ -s $out/bench.md ]] && { echo "=== $out/bench.md"; cat "$out/bench.md"; }
  if (( ${#failed[@]} )); then
    log "FAILED: ${failed[*]}; logs in $out"
    exit 1
  fi
  log "all steps passed; logs in $out"
}

# The graphs table's sides the GPU acceptance asks for (bench/train/gpu.sh's GRAPHS_VS).
acceptance_sides="default reduce-overhead"
# What the benchmark of this machine's calls planned and finished (bench/train/gpu.sh's ROWS_DONE).
rows_done=${GPU_CHECK_ROWS_DONE:-/tmp/hpctrain-gpu-rows.txt}

# leftover_rows: the rows the calls before planned and did not finish (a budget cut), one per
# line, in their order.
leftover_rows() {
  [[ -f $rows_done ]] || return 0
  awk '$1 == "plan" && !($2 in seen) { seen[$2]; order[++n] = $2 }
       $1 == "done" { finished[$2] }
       END { for (i = 1; i <= n; i++) if (!(order[i] in finished)) print order[i] }' "$rows_done"
}

# bench_rows: ROWS and GRAPHS_VS for bench (exported; those given are kept): without ROWS, what
# the calls before left out (leftover_rows, against the acceptance's sides; the first call's rows
# when no benchmark ran), or when they finished everything, the graphs table's other sides.
bench_rows() {
  [[ -z ${ROWS:-} ]] || return 0
  # No benchmark ran before (run skipped it, or stopped first): the first call's rows.
  ROWS="graphs jpeg"
  [[ -f $rows_done ]] && ROWS=$(leftover_rows | paste -sd ' ')
  if [[ -n $ROWS ]]; then
    GRAPHS_VS=${GRAPHS_VS:-$acceptance_sides}
  else
    ROWS=graphs GRAPHS_VS=${GRAPHS_VS:-eager none}
  fi
  export ROWS GRAPHS_VS
}

# bench: bench/train/gpu.sh alone, on a machine where `run` built build-gpu (a second call on the
# warm machine); its tables to $out/bench.md. ROWS, GRAPHS_VS and COMPILE_MODES pick the rows,
# bench_rows when ROWS is not given.
bench_again() {
  [[ -x build-gpu/bin/hpctrain-worker ]] || { log "no build-gpu/bin/hpctrain-worker: 'run' first"; exit 1; }
  mkdir -p "$out"
  unpack > /dev/null 2>&1
  # The first call's compiled peer, when the machine still has it.
  [[ -f $peer_cache/cold.txt ]] && export PEER_CACHE=$peer_cache
  local status=0
  bench_rows
  log "bench: ROWS=\"$ROWS\" GRAPHS_VS=\"${GRAPHS_VS:-}\" (stopped after $budget s)"
  echo "bench (again): ROWS=\"$ROWS\" GRAPHS_VS=\"${GRAPHS_VS:-}\"" >> "$out/summary.txt"
  TIMES=$out/summary.txt ROWS_DONE=$rows_done timeout -k 10 "$budget" bench/train/gpu.sh build-gpu \
    > "$out/bench.md" 2> "$out/bench.log" || status=$?
  cap "$out/bench.log"
  cat "$out/bench.md" "$out/summary.txt"
  return "$status"
}

case "${1:-auto}" in
  prepare) prepare ;;
  run) run ;;
  bench) bench_again ;;
  bench-rows) bench_rows; echo "ROWS=\"$ROWS\" GRAPHS_VS=\"${GRAPHS_VS:-}\"" ;;
  auto)
    prepare
    if nvidia-smi > /dev/null 2>&1; then
      run
    else
      log "no GPU here: checking that the packages are all the build needs"
      unpack
      check
    fi
    ;;
  *) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
