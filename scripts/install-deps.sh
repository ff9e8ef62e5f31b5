#!/usr/bin/env bash
# Installs everything hpctrain needs on a fresh Debian bookworm machine; safe to run again (it only
# does what is missing) and twice at once (the second waits for the first). apt waits for another
# program's apt/dpkg lock, unattended upgrades say, up to HPCTRAIN_APT_WAIT_S seconds (900).
#   - Debian packages from scripts/apt-packages.txt
#   - the pinned torch wheel (scripts/python-requirements.txt) in a virtual environment kept
#     outside the checkout, in $HPCTRAIN_VENV (default ~/.cache/hpctrain/venv-torch<version>),
#     shared by every clone on the machine and linked into the checkout as .venv (git-ignored)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

log() { printf 'install-deps: %s\n' "$*" >&2; }
source "$here/apt-wait.sh"

# One install at a time on this machine: two would race on apt and on the shared venv below.
lock_dir=${XDG_CACHE_HOME:-$HOME/.cache}/hpctrain
mkdir -p "$lock_dir"
exec {lock_fd}>> "$lock_dir/install-deps.lock"
if ! flock -n "$lock_fd"; then
  wait_s=${HPCTRAIN_INSTALL_WAIT_S:-3600}
  log "another install-deps is running on this machine; waiting for it (up to $wait_s s)"
  flock -w "$wait_s" "$lock_fd" || { log "gave up after $wait_s s waiting for the other install-deps"; exit 1; }
fi

packages() { grep -v '^\s*\(#\|$\)' "$here/apt-packages.txt"; }

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { log "not root and no sudo: install $(packages | tr '\n' ' ')"; exit 1; }
  sudo_cmd=(sudo)
fi

mapfile -t wanted < <(packages)
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} )); then
  log "apt: installing ${missing[*]}"
  apt_get_waiting update -qq
  DEBIAN_FRONTEND=noninteractive apt_get_waiting install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
else
  log "apt: all ${#wanted[@]} packages present"
fi
# Debian starts these daemons on install; hpctrain's clusters run their own from a temp dir.
for svc in slurmctld slurmd munge; do
  if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
    "${sudo_cmd[@]}" systemctl stop "$svc" || true
  fi
done

torch_pin=$(grep -E '^torch==' "$here/python-requirements.txt" | cut -d= -f3)
venv=${HPCTRAIN_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hpctrain/venv-torch$torch_pin}
stamp=$venv/.hpctrain-requirements
if [[ -f $stamp ]] && cmp -s "$stamp" "$here/python-requirements.txt" \
   && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  log "python: $venv is up to date"
else
  log "python: installing $(grep -v '^#' "$here/python-requirements.txt" | tr '\n' ' ')into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/python-requirements.txt"
  cp "$here/python-requirements.txt" "$stamp"
fi
ln -sfn "$venv" "$root/.venv"
log "done: torch $("$root/.venv/bin/python" -c 'import torch;print(torch.__version__)')"
