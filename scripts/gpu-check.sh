#!/usr/bin/env bash
# The GPU checks, in one command, for a machine with an NVIDIA GPU (../shared/gpu/README.md):
# build the CUDA build, run the gpu-labelled tests, and run the GPU training benchmark
# (bench/train/gpu.sh: ResNet-50, fp16 and bf16, channels_last, batch 256, synthetic and HDF5
# data, hpctrain-worker against PyTorch eager AMP with torchvision's ResNet-50, same GPU).
#
#   scripts/gpu-check.sh prepare   here, with a package registry: download the Debian packages a
#                                  bare GPU image lacks (below) into .gpu-debs/ (git-ignored)
#   scripts/gpu-check.sh run       on the GPU machine: unpack .gpu-debs/ under /tmp (never into /),
#                                  configure with HPCTRAIN_CUDA=ON against python3's torch, build,
#                                  test, benchmark; logs under $OUT (or ./gpu-check-out) whichever
#                                  step fails, and a non-zero status when one did
#   scripts/gpu-check.sh           prepare, then run when nvidia-smi sees a GPU; without one it
#                                  checks the package list: every library the build links and
#                                  every program it runs from the packages finds what it needs in
#                                  them (or in glibc and GCC's runtime, which every image has), and
#                                  a configure that sees no package outside them succeeds
#
# With the device tool: `scripts/gpu-check.sh prepare` here, then run(command="scripts/gpu-check.sh
# run", carry=[".gpu-debs"]).
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
  log "downloaded $(ls "$debs"/*.deb | wc -l) packages ($(du -sh "$debs" | cut -f1)) into $debs"
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

# check: the package list is whole. A configure (CPU or, with nvcc here, CUDA) that finds nothing
# under /usr but the compiler (CMAKE_IGNORE_PREFIX_PATH; pkg-config sees the prefix alone), then
# the closure of every library it links from the prefix and of the programs the build runs.
check() {
  local dir=/tmp/hpctrain-gpu-check-configure cuda=OFF python=python3 libs
  command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] && cuda=ON
  [[ -x $root/.venv/bin/python ]] && python=$root/.venv/bin/python
  rm -rf "$dir"
  HPCTRAIN_PYTHON=$python configure "$dir" "$cuda" -DCMAKE_IGNORE_PREFIX_PATH="/usr;/" \
    > "$dir.log" 2>&1 || { tail -n 30 "$dir.log"; log "configure failed: $dir.log"; return 1; }
  grep -q 'torch=none' "$dir.log" \
    && { log "configure found no torch ($python): the runtime (PMIx, gloo) went unchecked"; return 1; }
  mapfile -t libs < <(grep -Eho "$prefix/[^ ]*\.(so[.0-9]*|a)( |$)" "$dir/build.ninja" | sed "s/ $//" | sort -u)
  (( ${#libs[@]} )) || { log "the build links nothing from $prefix"; return 1; }
  closure "${libs[@]}" "$prefix/usr/bin/protoc" "$prefix/usr/bin/jq" "$prefix/usr/bin/pkgconf" \
    || { log "the package list lacks the libraries above"; return 1; }
  log "ok: configure ($cuda CUDA, $python) sees only the prefix's packages; the ${#libs[@]}" \
      "libraries it links and protoc, jq and pkgconf need nothing outside them and glibc/GCC"
}

# step NAME LOG CMD...: CMD's output to the terminal and to $out/LOG; a failure is recorded in
# failed, and the status returned, but nothing stops: the logs of every step land under $out.
failed=()
step() {
  local name=$1 file=$out/$2 status
  shift 2
  log "$name: $*"
  set +e
  "$@" 2>&1 | tee "$file"
  status=${PIPESTATUS[0]}
  set -e
  (( status == 0 )) || { log "$name failed (status $status), log: $file"; failed+=("$name"); }
  return "$status"
}

run() {
  [[ -d $debs ]] || { log "no $debs: run 'scripts/gpu-check.sh prepare' where apt works"; exit 1; }
  nvidia-smi > /dev/null 2>&1 || { log "no GPU (nvidia-smi fails)"; exit 77; }
  mkdir -p "$out"
  nvidia-smi 2>&1 | tee "$out/nvidia-smi.txt"
  unpack
  if step configure configure.log configure build-gpu ON \
     && step build build.log cmake --build build-gpu -j "$(nproc)"; then
    step ctest ctest-gpu.log ctest --test-dir build-gpu -L gpu --output-on-failure || true
    cp build-gpu/Testing/Temporary/LastTest.log "$out/ctest-LastTest.log" 2>/dev/null \
      || log "no build-gpu/Testing/Temporary/LastTest.log"
    step bench bench-gpu.md bench/train/gpu.sh build-gpu || true
  fi
  if (( ${#failed[@]} )); then
    log "FAILED: ${failed[*]}; logs in $out"
    exit 1
  fi
  log "all steps passed; logs in $out"
}

case "${1:-auto}" in
  prepare) prepare ;;
  run) run ;;
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
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
