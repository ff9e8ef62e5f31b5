#!/usr/bin/env bash
# cmake/link_check.cmake for real: the folders' arrows run launcher/ -> runtime/ only. Configures
# (only, without the torch runtime) a copy of the source tree as it is (must pass), then copies
# with one arrow planted the wrong way: a runtime library linking a launcher library, and a
# datasets/ program linking one through a runtime library it links (each must fail, naming the
# target and the chain that pulls the launcher library in).
#   layer_check.sh SOURCE_DIR CMAKE GENERATOR
set -uo pipefail
src=$1 cmake=$2 generator=$3
source "$(dirname "${BASH_SOURCE[0]}")/../../support/expect.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
copy() {  # copy NAME: the source tree, less builds and environments, at $tmp/NAME
  mkdir -p "$tmp/$1"
  tar -C "$src" --exclude='./build*' --exclude=./.git --exclude=./.venv --exclude=./.gpu-debs \
    -cf - . | tar -C "$tmp/$1" -xf -
}
# configure NAME: sets status and out (CMake's wrapped message joined into one line).
configure() {
  out=$("$cmake" -S "$tmp/$1" -B "$tmp/build-$1" -G "$generator" -DHPCTRAIN_RUNTIME=OFF \
        -DHPCTRAIN_BUILD_TESTS=OFF 2>&1)
  status=$?
  out=$(tr -s ' \n' '  ' <<<"$out")
}
has() { [[ $out == *"$1"* ]] || check_failed "$2: no '$1' in: $out"; }
plant() {  # plant NAME FILE SED: a copy with FILE edited by SED (which must change it)
  copy "$1"
  sed -i "$3" "$tmp/$1/$2"
  cmp -s "$src/$2" "$tmp/$1/$2" && check_failed "$1: the plant did not change $2"
}

copy clean
configure clean
[[ $status == 0 ]] || check_failed "the tree as it is failed configure: $out"

plant data runtime/data/CMakeLists.txt \
  's/target_link_libraries(hpctrain_data PUBLIC /&hpctrain_slurm /'
configure data
[[ $status != 0 ]] || check_failed "configure accepted hpctrain_data linking hpctrain_slurm"
has "links the launcher library hpctrain_slurm (" data
has "hpctrain_data -> hpctrain_slurm)" data

plant spec runtime/spec/CMakeLists.txt \
  's/target_link_libraries(hpctrain_spec PUBLIC /&hpctrain_launcher_include /'
configure spec
[[ $status != 0 ]] || check_failed "configure accepted hpctrain_spec linking launcher/'s includes"
has "links the launcher library hpctrain_launcher_include (" spec
has "hpctrain_data -> hpctrain_spec -> hpctrain_launcher_include)" spec
finish "ok: runtime/ and datasets/ link nothing of launcher/"
