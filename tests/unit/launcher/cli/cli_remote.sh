#!/usr/bin/env bash
# hpctrain --host against a real sshd (Debian's openssh-server) that this test starts on loopback:
# its own host key, its own authorized key, a high port; the login node is this machine, with the
# built hpctrain on the PATH ssh sessions get and stand-ins for squeue, sacct and scancel. ssh runs
# with a config of the test's own (HPCTRAIN_SSH, a wrapper adding -F), ControlMaster on.
#   - check, render and submit --dry-run over ssh print, write and exit as they do here, with a
#     spec file name and spec values that a shell would read as code (quotes, $(...), backticks,
#     ;, globs, a newline, unicode, spaces): nothing of them may run, all must arrive intact;
#   - the spec's relative paths are the login node's (--remote-dir, else the ssh home);
#   - status and list of a run directory; cancel; report's page copied back byte for byte;
#   - logs -f ending when the job ends, and on SIGINT (to hpctrain alone, and to its whole
#     process group as a terminal's Ctrl-C sends it), the remote follow ending with it;
#   - a profile's login_host on a machine without sbatch;
#   - ssh failures (connection refused, a key the host refuses, no remote hpctrain, a host that
#     would be an ssh option) named, with their exit statuses.
#   cli_remote.sh HPCTRAIN
set -uo pipefail
hpctrain=$1
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../../../support/sshd.sh"

for tool in setsid pgrep; do
  command -v "$tool" > /dev/null || fail "no $tool"
done
tmp=$(mktemp -d /tmp/hpctrain-remote.XXXXXX)
cleanup() {
  # A follow on the login node that a failed case left behind: this test's, by its folder.
  local pid
  for pid in $(pgrep -f -- "logs.*--follow -- $tmp/"); do kill "$pid" 2> /dev/null; done
  stop_sshd
  rm -rf "$tmp"
}
trap cleanup EXIT
fail_context() { sshd_log; }

# wait_for SECONDS WHAT CMD...: until CMD succeeds, or fail naming WHAT.
wait_for() {
  local seconds=$1 what=$2
  local deadline=$((SECONDS + seconds))
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || fail "waited ${seconds}s in vain for $what"
    sleep 0.1
  done
}

# --- The login node: sshd on loopback, keys of its own, stand-ins for Slurm on its PATH.
mkdir -p "$tmp/remote-bin" "$tmp/local" "$tmp/runs" "$tmp/rdir" "$tmp/laptop-bin"
ln -s "$hpctrain" "$tmp/remote-bin/hpctrain"
: > "$tmp/slurm.conf"
# The stand-ins answer from $tmp/squeue-ID ("ID|STATE|REASON|NODES") and log their calls.
for cmd in squeue sacct; do
  cat > "$tmp/remote-bin/$cmd" <<'SH'
#!/bin/bash
id=; for a in "$@"; do [[ $a == --jobs=* ]] && id=${a#--jobs=}; done
echo "${0##*/} $id" >> "$STANDIN/calls"
[[ ${0##*/} == squeue ]] && cat "$STANDIN/squeue-$id" 2>/dev/null; exit 0
SH
done
cat > "$tmp/remote-bin/scancel" <<'SH'
#!/bin/bash
echo "scancel $*" >> "$STANDIN/calls"
SH
# An sbatch on PATH: this is a cluster, where a profile's login_host is not used.
printf '#!/bin/sh\necho "sbatch: not in this test" >&2; exit 1\n' > "$tmp/remote-bin/sbatch"
chmod +x "$tmp/remote-bin"/*

# The login node's TMPDIR, where the spec's staging folders go: the test's own.
mkdir -p "$tmp/remote-tmp"
start_sshd "$tmp" PATH="$tmp/remote-bin:/usr/local/bin:/usr/bin:/bin" SLURM_CONF="$tmp/slurm.conf" \
  STANDIN="$tmp" TMPDIR="$tmp/remote-tmp"
export HPCTRAIN_SSH=$tmp/ssh
unset HPCTRAIN_HOST HPCTRAIN_PROFILE HPCTRAIN_PROFILE_PATH
# Here sees the same stand-ins as the login node, so that outputs compare.
export PATH=$tmp/remote-bin:$PATH SLURM_CONF=$tmp/slurm.conf STANDIN=$tmp
remote() { "$hpctrain" --host remote-test "$@"; }
cd "$tmp/local" || fail "cd"

# same_as_here WHAT ARGS...: hpctrain ARGS over ssh prints the same stdout and stderr and exits
# with the same status as here.
same_as_here() {
  local what=$1 here_status there_status
  shift
  "$hpctrain" "$@" > "$tmp/here.out" 2> "$tmp/here.err"
  here_status=$?
  remote "$@" > "$tmp/there.out" 2> "$tmp/there.err"
  there_status=$?
  [[ $here_status == "$there_status" ]] ||
    check_failed "$what: exit status $there_status over ssh, $here_status here; over ssh it said: $(cat "$tmp/there.err")"
  cmp -s "$tmp/here.out" "$tmp/there.out" ||
    check_failed "$what: stdout over ssh differs from here: $(diff "$tmp/here.out" "$tmp/there.out" | head -20)"
  cmp -s "$tmp/here.err" "$tmp/there.err" ||
    check_failed "$what: stderr over ssh differs from here: $(diff "$tmp/here.err" "$tmp/there.err" | head -20)"
}

# --- check, render, submit --dry-run: hostile file name and values arrive intact, run nowhere.
pwned=$tmp/pwned
dir="sub dir 'q'"
name=$'we\'ird $(id>&2) `id>&2` ; * ? ü "q" \\ $HOME\nx.toml'
mkdir -p "$dir"
spec="$dir/$name"
cat > "$spec" <<EOF
[job]
name = "remote-t"
run_dir = "$tmp/runs/{name}"
worker = "/bin/true"
env = { HOSTILE = "it's \$(touch $pwned) \`touch $pwned\` ; * \\"q\\" ü \$HOME" }
[data]
synthetic = true
[model]
arch = "resnet20"
num_classes = 10
EOF
hostile_set="job.env.OTHER=a b'c \$(touch $pwned) \`touch $pwned\` ;* ü"
# The values alone, in a spec with a plain name.
cp "$spec" plain.toml
same_as_here "check of hostile values" check --offline --print plain.toml --set "$hostile_set"
[[ -e $pwned ]] && check_failed "a --set value reached the remote shell unquoted ($pwned was created)"
same_as_here "check" check --offline --print "$spec" --set "$hostile_set"
grep -qF "OTHER = \"a b'c \$(touch $pwned) \`touch $pwned\` ;* ü\"" "$tmp/there.out" ||
  check_failed "--set's value did not arrive intact: $(grep OTHER "$tmp/there.out")"
same_as_here "render" render "$spec" --set "$hostile_set"
grep -qF "export HOSTILE='it'\\''s \$(touch $pwned)" "$tmp/there.out" ||
  check_failed "the spec's value did not arrive intact: $(grep HOSTILE "$tmp/there.out")"
bad="$dir/bad $name"
sed 's/^arch = /arhc = /' "$spec" > "$bad"
same_as_here "check of a bad spec" check --offline "$bad" --set job.nodes=0 --set train.epochs=x
[[ $(< "$tmp/there.err") == *$'\n'"$bad:9:1: error: [model.arhc] unknown key"* ]] ||
  check_failed "the error does not name the spec file and line: $(cat "$tmp/there.err")"
same_as_here "a newline in --set" check --offline "$spec" --set $'job.env.X=a\nb'
same_as_here "a missing spec" check --offline "$dir/missing;\$(id).toml"
same_as_here "an absolute spec path" render "$tmp/local/$spec"
# A spec named by an absolute path (or one going up) is sent as its file name: messages name that.
remote check --offline "$tmp/local/$bad" 2> "$tmp/there.err"
[[ $(< "$tmp/there.err") == "bad $name:9:1: error: [model.arhc] unknown key"* ]] ||
  check_failed "a spec given by its absolute path is not named by its file name: $(cat "$tmp/there.err")"
# render -o writes here.
remote render "$spec" -o "$tmp/local/script 'q'.sh" || check_failed "render -o over ssh failed"
"$hpctrain" render "$spec" > "$tmp/here.sh"
cmp -s "$tmp/here.sh" "$tmp/local/script 'q'.sh" || check_failed "render -o over ssh wrote something else than render here"
# submit --dry-run: the same run directory either way.
run=$tmp/runs/remote-t
expect 0 "^dry run: wrote $run/job.sbatch; not submitted$" remote submit --dry-run "$spec" --set "$hostile_set"
mv "$run" "$tmp/there-run"
expect 0 "^dry run: wrote $run/job.sbatch; not submitted$" "$hpctrain" submit --dry-run "$spec" --set "$hostile_set"
diff -r "$tmp/there-run" "$run" > "$tmp/diff" || check_failed "submit --dry-run over ssh wrote another run directory: $(head -20 "$tmp/diff")"
grep -rq "uid=" "$tmp"/*.err && check_failed "a file name ran as code: $(grep -r "uid=" "$tmp"/*.err)"
[[ -e $pwned ]] && check_failed "a spec value ran as code on one side ($pwned exists)"
[[ -z $(ls -A "$tmp/remote-tmp") ]] ||
  check_failed "staging folders are left on the login node: $(ls -A "$tmp/remote-tmp")"

# --- Relative paths in the spec are the login node's: --remote-dir, else ssh's home directory.
printf '[job]\nname = "rel"\nrun_dir = "%s/runs/{name}"\n[data]\ntrain = ["rel/train.h5"]\n' "$tmp" > rel.toml
printf '[model]\narch = "resnet20"\nnum_classes = 10\n' >> rel.toml
expect 0 "train = \\[\"$tmp/rdir/rel/train.h5\"\\]" \
  "$hpctrain" --host remote-test --remote-dir "$tmp/rdir" check --offline --no-path-checks --print rel.toml
home=$(getent passwd "$(id -un)" | cut -d: -f6)
expect 0 "train = \\[\"$home/rel/train.h5\"\\]" remote check --offline --no-path-checks --print rel.toml
expect 2 "no file matches \"$tmp/rdir/rel/train.h5\"" \
  "$hpctrain" --host remote-test --remote-dir "$tmp/rdir" check --offline rel.toml
expect 2 "no such file or directory|No such file" \
  "$hpctrain" --host remote-test --remote-dir "$tmp/no such dir" status "$run"

# --- status, list and cancel of a run directory; a relative one from --remote-dir.
printf '{"job_id":"4242","submitted_at":"2026-11-22T02:48:07Z","array_tasks":0}\n' > "$run/submissions.jsonl"
echo "4242|RUNNING|None|n1" > "$tmp/squeue-4242"
same_as_here "status" status "$run"
grep -q RUNNING "$tmp/there.out" || check_failed "status over ssh does not say RUNNING: $(cat "$tmp/there.out")"
expect 0 '"state": "RUNNING"' remote status --json "$run"
same_as_here "list" list "$tmp/runs"
same_as_here "status of a folder that is no run" status "$tmp/local"
expect 0 "run: +$run" "$hpctrain" --host remote-test --remote-dir "$tmp/runs" status remote-t
expect 0 "^cancelled job 4242$" remote cancel "$run"
grep -q "^scancel 4242$" "$tmp/calls" || check_failed "cancel over ssh did not call scancel 4242"
same_as_here "cancel of a run never submitted" cancel "$tmp/there-run"

# --- report: the page comes back byte for byte; a failed one leaves nothing here.
# The page's place on the login node (stderr), then its copy here (stdout).
expect 0 "^$run/report.html"$'\n'"remote-t-report.html$" remote report "$run"
cmp -s remote-t-report.html "$run/report.html" || check_failed "the page copied back differs from $run/report.html"
page="$tmp/local/page 'q' \$(id).html"
expect 0 $'\n'"$tmp/local/page 'q' \\\$\\(id\\).html$" remote report "$run" -o "$page"
cmp -s "$page" "$run/report.html" || check_failed "report -o: the page copied back differs"
same_as_here "report of no run" report "$tmp/nope"
[[ -e nope-report.html ]] && check_failed "a failed report left nope-report.html here"
ls -a | grep -q '^\.nope' && check_failed "a failed report left its temporary here: $(ls -a)"

# --- logs -f: ends when the job ends; on SIGINT, with the follow on the login node.
log=$run/logs/slurm-4242.out
mkdir -p "$run/logs"
printf 'attempt 1\nline 1\n' > "$log"
remote logs -f "$run" > "$tmp/follow.out" 2> "$tmp/follow.err" &
follow=$!
wait_for 15 "logs -f over ssh to print the log" grep -q "line 1" "$tmp/follow.out"
echo "line 2" >> "$log"
echo "4242|COMPLETED|None|n1" > "$tmp/squeue-4242"
wait_for 20 "logs -f over ssh to end with the job" eval '! kill -0 $follow 2>/dev/null'
wait "$follow" || check_failed "logs -f over ssh exited $?: $(cat "$tmp/follow.err")"
cmp -s "$tmp/follow.out" "$log" || check_failed "logs -f over ssh printed other than the log: $(cat "$tmp/follow.out")"

# remote_follows: a process following this run's log on the login node (or ssh's, whose
# command line holds the remote one).
remote_follows() { pgrep -f -- "logs.*--follow.*$run" > /dev/null; }
# interrupted HOW: SIGINT to hpctrain alone (ssh then gets the end of its stdin) or to its process
# group (as Ctrl-C in a terminal: ssh ends the connection itself); both end the remote follow.
interrupted() {
  echo "4242|RUNNING|None|n1" > "$tmp/squeue-4242"
  setsid "$hpctrain" --host remote-test logs -f "$run" > "$tmp/follow.out" 2> "$tmp/follow.err" &
  follow=$!
  wait_for 15 "logs -f over ssh to print the log ($1)" grep -q "line 2" "$tmp/follow.out"
  wait_for 5 "the follow on the login node ($1)" remote_follows
  if [[ $1 == group ]]; then kill -INT -- "-$follow"; else kill -INT "$follow"; fi
  wait_for 20 "logs -f over ssh to end on SIGINT ($1)" eval '! kill -0 $follow 2>/dev/null'
  wait "$follow" || check_failed "logs -f over ssh exited $? on SIGINT ($1): $(cat "$tmp/follow.err")"
  grep -q "interrupted" "$tmp/follow.err" || check_failed "logs -f over ssh did not say it was interrupted ($1): $(cat "$tmp/follow.err")"
  wait_for 10 "the follow on the login node to end with ssh ($1)" eval '! remote_follows'
}
interrupted hpctrain
interrupted group

# --- A site profile's login_host, used where there is no sbatch.
mkdir -p "$tmp/profiles"
printf '# for laptops\nlogin_host = "remote-test"\n[job]\npartition = "debug"\n' > "$tmp/profiles/laptop.toml"
printf 'login_host = "-oProxyCommand=touch %s"\n' "$pwned" > "$tmp/profiles/bad.toml"
ln -s "$tmp/ssh" "$tmp/laptop-bin/ssh"
laptop() { env PATH="$tmp/laptop-bin" HPCTRAIN_PROFILE_PATH="$tmp/profiles" "$@"; }
expect 0 "train = \\[\"$tmp/rdir/rel/train.h5\"\\]" \
  laptop HPCTRAIN_PROFILE=laptop "$hpctrain" --remote-dir "$tmp/rdir" check --offline --no-path-checks --print rel.toml
expect 0 "train = \\[\"$tmp/local/rel/train.h5\"\\]" \
  env HPCTRAIN_PROFILE_PATH="$tmp/profiles" HPCTRAIN_PROFILE=laptop "$hpctrain" check --offline --no-path-checks --print rel.toml
expect 2 "$tmp/profiles/bad.toml:1:1: error: \\[login_host\\] \"-oProxyCommand=touch $pwned\" is not a login host" \
  laptop HPCTRAIN_PROFILE=bad "$hpctrain" status "$run"

# --- ssh's failures: named, with what to do, and exit statuses.
expect 255 "hpctrain: ssh to wrong-port failed \\(exit status 255.*check that \`ssh wrong-port true\` works" \
  "$hpctrain" --host wrong-port status "$run"
expect 255 "Permission denied.*hpctrain: ssh to refused-key failed" \
  "$hpctrain" --host refused-key check --offline "$spec"
expect 127 "hpctrain: $tmp/none/hpctrain was not found on remote-test \\(exit status 127\\).*--remote-hpctrain" \
  "$hpctrain" --host remote-test --remote-hpctrain "$tmp/none/hpctrain" check --offline "$spec"
expect 2 "hpctrain: --host: \"-oProxyCommand=touch $pwned\" is not a login host" \
  "$hpctrain" --host "-oProxyCommand=touch $pwned" status "$run"
expect 2 "hpctrain: HPCTRAIN_HOST: \"a;b\" is not a login host" env HPCTRAIN_HOST='a;b' "$hpctrain" list
expect 2 "hpctrain drill runs on the login node itself.*--host" remote drill "$spec"
# --remote-hpctrain with an odd path; HPCTRAIN_HOST; --host '' runs here.
odd="$tmp/odd bin 'q' \$(id)"
mkdir -p "$odd" && ln -s "$hpctrain" "$odd/hpctrain"
expect 0 "run: +$run" "$hpctrain" --host remote-test --remote-hpctrain "$odd/hpctrain" status "$run"
expect 0 "run: +$run" env HPCTRAIN_HOST=remote-test "$hpctrain" status "$run"
expect 0 "run: +$run" env HPCTRAIN_HOST=wrong-port "$hpctrain" --host '' status "$run"
[[ -e $pwned ]] && check_failed "a value ran as code ($pwned exists)"

finish
