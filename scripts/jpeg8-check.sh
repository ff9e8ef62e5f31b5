#!/usr/bin/env bash
# Builds and tests hpctrain's JPEG code against libjpeg's 8 API, as Ubuntu ships it: Debian and
# RHEL/Rocky ship libjpeg-turbo with the 6.2 API, Ubuntu's libjpeg-dev (libjpeg-turbo8-dev) with
# the 8 API, whose jpeglib.h names some struct members differently, so code that compiles on
# Debian can fail to compile on Ubuntu. scripts/test.sh runs this after the main tests.
#   1. Debian bookworm's libjpeg-turbo source, fetched once with apt-get source (no change to the
#      system's apt configuration), built with -DWITH_JPEG8=1 as a static library and installed
#      into $HPCTRAIN_JPEG8_CACHE (default ~/.cache/hpctrain/libjpeg-turbo8, shared by every
#      clone on the machine, like install-deps.sh's venv); later runs use it without the network.
#   2. A torch-free hpctrain build ($HPCTRAIN_JPEG8_BUILD_DIR, default build-jpeg8) that finds
#      that prefix's libjpeg.pc first, of the targets the JPEG tests need only.
#   3. Checks the JPEG translation units saw JPEG_LIB_VERSION 80 and the test binaries link no
#      shared libjpeg, then runs the JPEG tests (gtest Jpeg.*, JpegTransform.*, Encoded.*, the
#      fuzz corpus replays, and the Python checks against PIL/torchvision where .venv exists).
#   jpeg8-check.sh [build|test]: only steps 1 and 2 (scripts/test.sh runs them beside the main
#   tests), or only step 3 on a build made so; both by default.
set -euo pipefail
shopt -s extglob
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc)
started=$SECONDS
phase=${1:-all}
[[ $phase == @(all|build|test) ]] || { echo "jpeg8-check: '$phase': want build, test or nothing" >&2; exit 2; }
log() { printf 'jpeg8-check: %s (%ds)\n' "$*" $((SECONDS - started)) >&2; }
die() { printf 'jpeg8-check: %s\n' "$*" >&2; exit 1; }

cache=${HPCTRAIN_JPEG8_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hpctrain/libjpeg-turbo8}
prefix=$cache/prefix
build=${HPCTRAIN_JPEG8_BUILD_DIR:-build-jpeg8}
mkdir -p "$cache"

# --- 1. libjpeg-turbo with the 8 API, once per machine -----------------------------------------
# The stamp is written last: a run killed half-way leaves no stamp, and the next one starts over.
# The lock keeps two clones' test runs from building into the same prefix at once.
build_libjpeg8() {
  local work=$cache/work apt=$cache/apt
  rm -rf "$work" "$prefix"
  mkdir -p "$work" "$apt/lists/partial"
  if ! compgen -G "$cache/src/libjpeg-turbo_*.dsc" >/dev/null; then
    log "downloading Debian bookworm's libjpeg-turbo source into $cache/src"
    # Into src.part, renamed when complete: an interrupted download is not taken for the source.
    rm -rf "$cache/src.part" && mkdir -p "$cache/src.part"
    echo 'deb-src http://deb.debian.org/debian bookworm main' > "$apt/sources.list"
    # Its own source list and index directory: the system's apt configuration is not touched
    # (the index lands in the cache, and root is not needed). apt still checks the index's
    # signature with the system's Debian keys, and the files' hashes with the index.
    local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
                -o "Dir::State::Lists=$apt/lists")
    if ! apt-get "${opts[@]}" -qq update >"$apt/log" 2>&1 \
       || ! (cd "$cache/src.part" && apt-get "${opts[@]}" -qq source --download-only libjpeg-turbo) \
            >>"$apt/log" 2>&1; then
      sed 's/^/  /' "$apt/log" >&2
      rm -rf "$cache/src.part"
      die "could not download libjpeg-turbo's source from deb.debian.org (the apt output is" \
          "above); without the network, put Debian's libjpeg-turbo_*.dsc, .orig.tar.gz and" \
          ".debian.tar.xz into $cache/src, or skip this step with HPCTRAIN_JPEG8=0"
    fi
    rm -rf "$cache/src" && mv "$cache/src.part" "$cache/src"
  fi
  local dsc
  dsc=$(compgen -G "$cache/src/libjpeg-turbo_*.dsc" | head -n 1)
  log "building $(basename "$dsc" .dsc) with the libjpeg 8 API into $prefix"
  # dpkg-source applies Debian's patches, as the distributions' packages do.
  dpkg-source --no-check -x "$dsc" "$work/src" >/dev/null
  # Static and position-independent: hpctrain's test binaries then carry this libjpeg inside them
  # and cannot pick up the system's libjpeg.so.62 at run time. No SIMD: nasm is not needed, and
  # the API under test is the same. Only the library is built (its tools, the TurboJPEG API and
  # docs are not needed), so it is installed by hand below.
  cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DWITH_JPEG8=1 -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DWITH_SIMD=OFF -DWITH_TURBOJPEG=OFF -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DCMAKE_INSTALL_LIBDIR="$prefix/lib" -DCMAKE_INSTALL_INCLUDEDIR="$prefix/include" \
    >"$work/configure.log" 2>&1 \
    || { tail -n 30 "$work/configure.log" >&2; die "configuring libjpeg-turbo failed"; }
  cmake --build "$work/build" -j "$jobs" --target jpeg-static >"$work/build.log" 2>&1 \
    || { tail -n 30 "$work/build.log" >&2; die "building libjpeg-turbo failed"; }
  install -D -m 644 "$work/build/libjpeg.a" "$prefix/lib/libjpeg.a"
  install -D -m 644 -t "$prefix/include" "$work/build/jconfig.h" "$work/src/jpeglib.h" \
    "$work/src/jmorecfg.h" "$work/src/jerror.h"
  install -D -m 644 "$work/build/pkgscripts/libjpeg.pc" "$prefix/lib/pkgconfig/libjpeg.pc"
  grep -q '^#define JPEG_LIB_VERSION  *80$' "$prefix/include/jconfig.h" \
    || die "$prefix/include/jconfig.h does not define JPEG_LIB_VERSION 80"
  [[ $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --variable=libdir libjpeg) == "$prefix/lib" ]] \
    || die "$prefix/lib/pkgconfig/libjpeg.pc does not point at $prefix/lib"
  rm -rf "$work"
  basename "$dsc" .dsc > "$prefix/.hpctrain-jpeg8"
}

if [[ $phase != test ]]; then
  exec {lock}>"$cache/.lock"
  flock "$lock"
  if [[ -f $prefix/.hpctrain-jpeg8 ]]; then
    log "libjpeg 8 API: $(cat "$prefix/.hpctrain-jpeg8") in $prefix"
  else
    build_libjpeg8
  fi
  flock -u "$lock"

# --- 2. hpctrain's JPEG targets against it -----------------------------------------------------
  log "configure and build ($build)"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  # pkg_check_modules caches what it found, the library's path too: forgotten here, so a build
  # directory configured before this prefix existed (or with another) looks again.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHPCTRAIN_BUILD_TESTS=ON \
    -DHPCTRAIN_RUNTIME=OFF -U '__pkg_config_checked_JPEG' -U 'pkgcfg_lib_JPEG_*' >/dev/null
  jpeg_lib=$(sed -n 's/^pkgcfg_lib_JPEG_jpeg:FILEPATH=//p' "$build/CMakeCache.txt")
  [[ $jpeg_lib == "$prefix/lib/libjpeg.a" ]] \
    || die "$build links libjpeg '$jpeg_lib', not $prefix/lib/libjpeg.a"
  # A failure list left from an earlier run would be shown again by test.sh after a build error.
  rm -f "$build/Testing/Temporary/LastTestsFailed.log"
  targets=(hpctrain_data_tests jpeg_fuzz_replay jpeg_fuzz_corpus jpeg_tool hpctrain-data)
  cmake --build "$build" -j "$jobs" --target "${targets[@]}"
fi
[[ $phase == build ]] && exit 0

# --- 3. the 8 API really used, then the tests ---------------------------------------------------
# Each source file that includes jpeglib.h, preprocessed with its own compile command: the
# JPEG_LIB_VERSION it compiled with. A new one that no target here compiles fails the check.
mapfile -t jpeg_sources < <(git grep -l '#include <jpeglib.h>' -- '*.cpp')
checked=()
while read -r dir && read -r file && read -r cmd; do
  [[ " ${jpeg_sources[*]} " == *" ${file#"$root"/} "* ]] || continue
  cmd=${cmd/ -o +([^ ]) / }  # the object file's -o: preprocessed to stdout instead
  version=$(cd "$dir" && eval "$cmd -dM -E" | sed -n 's/^#define JPEG_LIB_VERSION //p')
  [[ $version == 80 ]] || die "${file#"$root"/} compiled with JPEG_LIB_VERSION '$version', not 80"
  checked+=("${file#"$root"/}")
done < <(jq -r '.[] | .directory, .file, .command' "$build/compile_commands.json")
for f in "${jpeg_sources[@]}"; do
  [[ " ${checked[*]} " == *" $f "* ]] || die "$f includes jpeglib.h but $build compiles it nowhere"
done
# libjpeg's own check completes this one: jpeg_create_(de)compress passes the caller's
# JPEG_LIB_VERSION and struct size, and the 8 API library refuses any other.
for t in tests/unit/data/hpctrain_data_tests tests/fuzz/jpeg_fuzz_replay tests/fuzz/jpeg_fuzz_corpus \
         tests/unit/data/jpeg_tool bin/hpctrain-data; do
  [[ -x $build/$t ]] || die "no $build/$t"
  if ldd "$build/$t" | grep -q 'libjpeg\.so'; then
    die "$build/$t links a shared libjpeg: $(ldd "$build/$t" | grep 'libjpeg\.so')"
  fi
done
log "${#checked[@]} translation units compiled with JPEG_LIB_VERSION 80 (${jpeg_sources[*]});" \
    "no shared libjpeg linked"

log "JPEG tests"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --no-tests=error \
  -R '^(Jpeg|JpegTransform|Encoded)\.|^jpeg_fuzz_|^data_(jpeg_torchvision|convert_jpeg_folder)$'
log "passed"
