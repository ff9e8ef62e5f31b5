#!/usr/bin/env bash
# The installed tree on its own: `cmake --install` into a temporary prefix (writing nothing into
# the source tree), then, in a fresh bash with Debian's Lmod, what a user of a cluster does:
# `module use PREFIX/modulefiles; module load hpctrain`, the commands and man pages (a page per
# subcommand) are the prefix's, and the smoke spec installed with it, submitted to the local
# cluster, trains to completion with the installed worker and the installed site profile.
# `module unload` gives PATH back and takes the prefix off MANPATH. Skips (77) without help2man
# at configure time, Lmod or man. Needs HPCTRAIN_BUILD_DIR, HPCTRAIN_VERSION and
# HPCTRAIN_MAN_PAGES (set by CMake) besides what lib.sh needs.
: "${HPCTRAIN_BUILD_DIR:?}" "${HPCTRAIN_VERSION:?}" "${HPCTRAIN_MAN_PAGES:?}"
skip() {
  echo "SKIP: $*"
  exit 77
}
[[ $HPCTRAIN_MAN_PAGES == ON ]] ||
  skip "help2man was not found when the build was configured, so there are no man pages to" \
    "install (scripts/install-deps.sh installs it; then reconfigure)"
lmod_init=
for f in /etc/profile.d/lmod.sh /usr/share/lmod/lmod/init/bash; do
  [[ -f $f ]] && { lmod_init=$f; break; }
done
[[ -n $lmod_init ]] || skip "no Lmod (/etc/profile.d/lmod.sh): scripts/install-deps.sh installs it"
command -v man > /dev/null || skip "no man (man-db): scripts/install-deps.sh installs it"

source "$(dirname "$0")/lib.sh"
build=$(cd "$HPCTRAIN_BUILD_DIR" && pwd -P)
src=$(cd "$(dirname "$0")/../.." && pwd -P)
prefix=$work/prefix
version=$HPCTRAIN_VERSION

# What is installed is built (a no-op after a full build).
cmake --build "$build" --target hpctrain hpctrain-worker hpctrain-data hpctrain_man \
  hpctrain-worker_man hpctrain-data_man > "$work/build.log" 2>&1 ||
  { tail -n 30 "$work/build.log"; fail "building what is installed failed"; }

touch "$work/before-install"
sleep 0.1
cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
# Other build trees in the source tree are left out too: CI builds its sanitizer passes there
# (build-asan, build-tsan, ...) while these tests run.
prune=(-path "$build" -o -path "$src/.git")
for cache in "$src"/*/CMakeCache.txt; do
  [[ -f $cache ]] && prune+=(-o -path "$(dirname "$cache")")
done
written=$(find "$src" \( "${prune[@]}" \) -prune -o -newer "$work/before-install" -print)
[[ -z $written ]] || fail "cmake --install wrote into the source tree: $written"

for f in bin/hpctrain bin/hpctrain-worker bin/hpctrain-data share/man/man1/hpctrain.1 \
  share/man/man1/hpctrain-submit.1 share/man/man1/hpctrain-status.1 \
  share/man/man1/hpctrain-worker.1 share/man/man1/hpctrain-data.1 \
  share/man/man1/hpctrain-data-inspect.1 share/hpctrain/profiles/local.toml \
  share/hpctrain/configs/smoke-cpu.toml "modulefiles/hpctrain/$version.lua"; do
  [[ -f $prefix/$f ]] || fail "not installed: $prefix/$f"
done
# Every subcommand in the launcher's help has its page.
subs=$("$prefix/bin/hpctrain" --help | sed -n '/^Subcommands:/,/^$/p' | awk 'NF>1 {print $1}')
[[ -n $subs ]] || fail "no subcommands in hpctrain --help"
for s in $subs; do
  [[ -f $prefix/share/man/man1/hpctrain-$s.1 ]] || fail "no man page hpctrain-$s.1"
done

# The installed worker starts without the build tree and without LD_LIBRARY_PATH: its RUNPATH
# names libtorch, not the build directory.
ldd_out=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/hpctrain-worker") || fail "ldd: $ldd_out"
if grep -q 'not found' <<< "$ldd_out"; then
  fail "the installed worker lacks libraries: $(grep 'not found' <<< "$ldd_out")"
fi
grep -q 'libtorch' <<< "$ldd_out" || fail "the installed worker does not load libtorch: $ldd_out"
if readelf -d "$prefix/bin/hpctrain-worker" | grep -E 'R(UN)?PATH' | grep -qF "$build"; then
  fail "the installed worker's RUNPATH names the build tree"
fi
env -u LD_LIBRARY_PATH "$prefix/bin/hpctrain-worker" --version | grep -qx "hpctrain-worker $version" ||
  fail "the installed worker does not run"

# The installed launcher reads the installed profiles, never the checkout's.
hint=$("$prefix/bin/hpctrain" check "$prefix/share/hpctrain/configs/smoke-cpu.toml" \
  --profile no-such-profile 2>&1)
grep -qF "$prefix/share/hpctrain/profiles" <<< "$hint" || fail "profile search: $hint"
if grep -qF "$src/sbatch/profiles" <<< "$hint"; then
  fail "the installed launcher searches the source tree's profiles: $hint"
fi
# Marks the installed profile so that the frozen spec shows which one the submit read.
printf '[job.env]\nPROFILE_MARK = "installed"\n' >> "$prefix/share/hpctrain/profiles/local.toml"

# A user's login shell: nothing from this environment but SLURM_CONF.
cat > "$work/session.sh" <<'SESSION'
source "$LMOD_INIT" || { echo "cannot initialise Lmod"; exit 1; }
type module > /dev/null 2>&1 || { echo "no module command after $LMOD_INIT"; exit 1; }
check() { "$@" || { echo "session: failed: $*" >&2; exit 1; }; }
path_before=$PATH
system_page=$(man -w ls 2> /dev/null)
module use "$PREFIX/modulefiles"
check module load hpctrain
loaded=$(module -t list 2>&1)
check grep -qx "hpctrain/$VERSION" <<< "$loaded"
check test "$(command -v hpctrain)" = "$PREFIX/bin/hpctrain"
check test "$(command -v hpctrain-worker)" = "$PREFIX/bin/hpctrain-worker"
check test "$(command -v hpctrain-data)" = "$PREFIX/bin/hpctrain-data"
check test "$HPCTRAIN_DATA_DIR" = "$PREFIX/share/hpctrain"
# man-db also finds PREFIX/share/man from PATH; the module sets MANPATH for other man readers.
[[ :$MANPATH: == *":$PREFIX/share/man:"* ]] || { echo "session: MANPATH is '$MANPATH'"; exit 1; }
check test "$(man -w hpctrain)" = "$PREFIX/share/man/man1/hpctrain.1"
check test "$(man -w hpctrain-submit)" = "$PREFIX/share/man/man1/hpctrain-submit.1"
check test "$(man -w hpctrain-data)" = "$PREFIX/share/man/man1/hpctrain-data.1"
# The system's pages are still found (Lmod keeps MANPATH's empty entry).
check test "$(man -w ls 2> /dev/null)" = "$system_page"
# The pages render, and hpctrain(1) points at the subcommands' pages.
page=$(MANWIDTH=200 man hpctrain 2> /dev/null | col -b)
check grep -q 'hpctrain-submit(1)' <<< "$page"
check grep -q 'EXIT STATUS' <<< "$page"
page=$(MANWIDTH=200 man hpctrain-submit 2> /dev/null | col -b)
check grep -q 'hpctrain submit' <<< "$page"
check grep -q -- '--profile' <<< "$page"
check test "$(hpctrain --version)" = "hpctrain $VERSION"
help=$(module help hpctrain 2>&1)
check grep -q 'HPCTRAIN_DATA_DIR' <<< "$help"
whatis=$(module whatis hpctrain 2>&1)
check grep -q "Version: $VERSION" <<< "$whatis"
# The job loads the module itself too (job.modules), as a site's users write it: the batch
# script runs under set -u, which Lmod's init scripts are not written for.
hpctrain submit "$HPCTRAIN_DATA_DIR/configs/smoke-cpu.toml" --profile local \
  --set "job.run_dir=$WORK/{name}" --set "job.modules=[\"hpctrain/$VERSION\"]" \
  > "$WORK/job-id" || { echo "hpctrain submit failed"; exit 1; }
check module unload hpctrain
check test "$PATH" = "$path_before"
[[ ${MANPATH-} != *"$PREFIX"* ]] || { echo "session: MANPATH keeps the prefix: $MANPATH"; exit 1; }
check test -z "$(man -w hpctrain 2> /dev/null)"
check test -z "${HPCTRAIN_DATA_DIR-}"
check test -z "$(command -v hpctrain)"
echo "session ok"
SESSION
env -i HOME="$HOME" USER="$(id -un)" PATH=/usr/local/bin:/usr/bin:/bin TERM=dumb \
  SLURM_CONF="$SLURM_CONF" LMOD_INIT="$lmod_init" PREFIX="$prefix" VERSION="$version" WORK="$work" \
  bash --noprofile --norc "$work/session.sh" > "$work/session.log" 2>&1 ||
  { cat "$work/session.log"; fail "the module session failed"; }
id=$(cat "$work/job-id")
[[ $id =~ ^[0-9]+$ ]] || fail "submit printed '$id', not a job id"
submitted+=("$id")

# Training with the installed worker, to the end.
HPCTRAIN=$prefix/bin/hpctrain
run=$work/smoke-cpu
wait_state "$run" COMPLETED 420
grep -qx "worker = \"$prefix/bin/hpctrain-worker\"" "$run/spec.toml" ||
  fail "the frozen spec does not name the installed worker: $(grep worker "$run/spec.toml")"
grep -q 'PROFILE_MARK = "installed"' "$run/spec.toml" ||
  fail "the submit did not read the installed profile"
json=$("$HPCTRAIN" status --json "$run") || fail "hpctrain status --json failed"
[[ $(jq -r '.last_attempt.reason' <<< "$json") == completed ]] || fail "status: $json"
last_step=$(ledger_field "$run" 1 last_step)
[[ $last_step =~ ^[1-9][0-9]*$ ]] || fail "the ledger's last step is '$last_step'"
[[ $(jq -r '.last_checkpoint_step' <<< "$json") == "$last_step" ]] || fail "status: $json"
[[ -s $run/model.pt ]] || fail "no final weights $run/model.pt"
"$HPCTRAIN" status "$run" | grep -q 'completed' || fail "status text: $("$HPCTRAIN" status "$run")"
echo "ok"
