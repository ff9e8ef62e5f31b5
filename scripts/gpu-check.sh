#!/usr/bin/env bash
# The GPU checks, in one command, for a machine with an NVIDIA GPU (../shared/gpu/README.md):
# build the CUDA build, run the gpu-labelled tests, and run the GPU training benchmark
# (bench/train/gpu.sh: ResNet-50, fp16 and bf16, channels_last, batch 256, synthetic and HDF5
# data, hpctrain-worker against PyTorch eager AMP with torchvision's ResNet-50, same GPU).
#
#   scripts/gpu-check.sh prepare   here, with a package registry: download the Debian packages the
#                                  GPU machine lacks (HDF5, CLI11, toml11, nlohmann-json, gloo
#                                  headers, PMIx, GoogleTest) into .gpu-debs/ (git-ignored)
#   scripts/gpu-check.sh run       on the GPU machine: unpack .gpu-debs/ under /tmp (never into /),
#                                  configure with HPCTRAIN_CUDA=ON against python3's torch, build,
#                                  test, benchmark; results under $OUT (or ./gpu-check-out)
#   scripts/gpu-check.sh           prepare, then run when nvidia-smi sees a GPU; without one it
#                                  says so and checks that the unpacked packages configure a build
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

# What the build needs that the GPU image (CUDA, nvcc, cmake, ninja, python3 with torch) lacks.
packages=(libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-hl-100 libsz2 libaec0 libaec-dev
          libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libbrotli1 libldap-2.5-0 libsasl2-2
          libcli11-dev libtoml11-dev nlohmann-json3-dev libgloo-dev libpmix-dev libpmix2
          libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15 libgtest-dev googletest
          zlib1g-dev libstb-dev libstb0 libjpeg62-turbo libgomp1)

prepare() {
  mkdir -p "$debs"
  grep -qx '/.gpu-debs/' .gitignore 2>/dev/null || log "note: .gpu-debs/ should be git-ignored"
  (cd "$debs" && apt-get download "${packages[@]}" >/dev/null)
  log "downloaded $(ls "$debs"/*.deb | wc -l) packages ($(du -sh "$debs" | cut -f1)) into $debs"
}

unpack() {
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
  # pkg-config files name /usr; the sysroot maps them under the prefix.
  export PKG_CONFIG_PATH=$prefix/usr/lib/x86_64-linux-gnu/pkgconfig:$prefix/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export CMAKE_PREFIX_PATH=$prefix/usr
}

configure() {  # configure BUILD_DIR CUDA(ON|OFF)
  local python
  python=$(command -v python3)
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHPCTRAIN_BUILD_TESTS=ON \
    -DHPCTRAIN_CUDA="$2" -DHPCTRAIN_PYTHON="$python" \
    -DCMAKE_PREFIX_PATH="$prefix/usr" -DHDF5_ROOT="$prefix/usr"
}

run() {
  [[ -d $debs ]] || { log "no $debs: run 'scripts/gpu-check.sh prepare' where apt works"; exit 1; }
  nvidia-smi > /dev/null 2>&1 || { log "no GPU (nvidia-smi fails)"; exit 77; }
  mkdir -p "$out"
  nvidia-smi | tee "$out/nvidia-smi.txt"
  unpack
  configure build-gpu ON 2>&1 | tee "$out/configure.log"
  cmake --build build-gpu -j "$(nproc)" 2>&1 | tail -n 20 | tee "$out/build.log"
  ctest --test-dir build-gpu -L gpu --output-on-failure 2>&1 | tee "$out/ctest-gpu.log"
  bench/train/gpu.sh build-gpu 2>&1 | tee "$out/bench-gpu.md"
}

case "${1:-auto}" in
  prepare) prepare ;;
  run) run ;;
  auto)
    prepare
    if nvidia-smi > /dev/null 2>&1; then
      run
    else
      log "no GPU here: checking that the packages unpack and configure a CPU build"
      unpack
      configure /tmp/hpctrain-gpu-check-configure OFF > /tmp/hpctrain-gpu-check-configure.log 2>&1 \
        || { tail -n 20 /tmp/hpctrain-gpu-check-configure.log; exit 1; }
      log "ok: configure succeeds against $prefix; run 'scripts/gpu-check.sh run' on a GPU machine"
    fi
    ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
