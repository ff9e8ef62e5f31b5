#!/usr/bin/env bash
# Causes planted for real on the local cluster (docs/resilience.md "Why an attempt ended"), each
# recorded in attempts.jsonl with its cause and acted on, with the seconds from the plant to the
# recorded end (one summary line per case):
#   oom       submitted under ulimit -v 3 GiB (Slurm propagates the submitting shell's limits to the
#             tasks: PropagateResourceLimits=ALL by default) with 224-pixel images at batch 128:
#             libtorch's allocator (or operator new) fails, cause oom, stopped at once (one attempt,
#             job FAILED), the job's last log line naming the rank's peak RSS, the limit, the failed
#             allocation's size where libtorch says it, and train.batch_size
#   full      the run directory on a 2600 KiB tmpfs: the first checkpoint fits, the next ones and
#             the final weights do not (ENOSPC); the workers' own lines are lost with the disk, the
#             run directory's free space says why: cause filesystem, retried within the failure
#             budget (max_consecutive_failures = 1: failed_requeued, then failed), the retry
#             resumed from the checkpoint already written, the ledger whole
#   filled    the run directory on a 12 MiB tmpfs that another writer fills once the first
#             checkpoint is committed (dd until ENOSPC): the workers' lines are lost, the ledger line
#             is written into the room the supervisor kept (.ledger-reserve), the run directory's
#             free space says why: cause filesystem; the filler removed, the retry completes from
#             the checkpoint written before (failed_requeued, then completed)
#   readonly  the checkpoints directory a tmpfs of its own, remounted read-only once the first
#             checkpoint is committed (the run directory itself cannot be: the job's log files are
#             open for writing there, and Linux refuses to remount such a filesystem read-only):
#             the checkpoints fail with EROFS, the end-of-training one too, so the run has not
#             finished: cause filesystem, retried, then failed
# Needs root (mount).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
source "$here/../support/synthetic_spec.sh"
: "${WORKER:?}"
[[ $(id -u) == 0 ]] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }

mounts=()
unmount_all() {
  local id m
  for id in "${submitted[@]}"; do scancel "$id" 2>/dev/null || true; done
  for m in "${mounts[@]}"; do
    [[ ${KEEP_WORK:-0} == 1 ]] && cp -a "$m" "$m.kept"
    umount -l "$m" 2> /dev/null || true
  done
  cleanup
}
trap unmount_all EXIT
now() { date +%s.%N; }
since() { echo "$1 $2" | awk '{printf "%.1f", $2 - $1}'; }

spec() {  # spec NAME RUN_DIR KEY=VALUE...
  local name=$1 dir=$2
  shift 2
  synthetic_spec job.name="$name" job.profile=local job.tasks_per_node=2 job.time=00:20:00 \
    job.run_dir="$dir" job.worker="$WORKER" data.synthetic_samples=512 \
    data.synthetic_image_size=16 train.epochs=1 train.batch_size=16 train.log_every_steps=4 \
    train.eval_every_epochs=0 checkpoint.every_steps=4 preemption.max_consecutive_failures=1 \
    "$@" > "$work/$name.toml"
}
causes() { jq -r '"\(.reason):\(.cause)"' "$1/attempts.jsonl" | paste -sd ' '; }
lines() { [[ -f $1/attempts.jsonl ]] && wc -l < "$1/attempts.jsonl" || echo 0; }
# wait_lines RUN_DIR N SECONDS: until the ledger has N lines.
wait_lines() {
  local deadline=$((SECONDS + $3))
  until (( $(lines "$1") >= $2 )); do
    (( SECONDS < deadline )) || fail "no ledger line $2 in $1 within $3 s"
    sleep 0.2
  done
}
ended() { [[ $(state "$1") =~ ^(COMPLETED|FAILED|CANCELLED)$ ]]; }

oom=$work/oom full=$work/full/run filled=$work/filled/run ro=$work/readonly
mkdir -p "$work/full" "$work/filled" "$ro/checkpoints"
mount -t tmpfs -o size=2600k,mode=0755 tmpfs "$work/full" || fail "cannot mount a tmpfs"
mounts+=("$work/full")
mount -t tmpfs -o size=12m,mode=0755 tmpfs "$work/filled" || fail "cannot mount a tmpfs"
mounts+=("$work/filled")
mount -t tmpfs -o size=64m,mode=0700 tmpfs "$ro/checkpoints" || fail "cannot mount a tmpfs"
mounts+=("$ro/checkpoints")
spec oom "$oom" data.synthetic_image_size=224 train.batch_size=128 train.log_every_steps=1
spec full "$full"
spec readonly "$ro" data.synthetic_samples=2048
spec filled "$filled" data.synthetic_samples=2048

plant_oom=$(now)
(ulimit -v $((3 << 20)) && submit "$work/oom.toml" > /dev/null) || fail "submit under ulimit -v failed"
submitted+=("$(jq -r .job_id "$oom/submissions.jsonl" | tail -n 1)")
plant_full=$(now)  # the disk is as small from the start: the plant is the submission
submit "$work/full.toml" > /dev/null
submit "$work/readonly.toml" > /dev/null
submit "$work/filled.toml" > /dev/null

# One loop watches the three: remounts readonly's checkpoints read-only once its first checkpoint
# is committed (refused, busy, while a rank holds a checkpoint file open for writing: again until
# it goes through) and notes when each ledger gets its first line.
plant_ro='' end_oom='' end_full='' end_ro='' plant_filled='' end_filled=''
deadline=$((SECONDS + 180))
until [[ -n $end_oom && -n $end_full && -n $end_ro && -n $end_filled ]]; do
  (( SECONDS < deadline )) ||
    fail "no recorded end within 180 s (oom ${end_oom:-no}, full ${end_full:-no}, readonly ${end_ro:-no}, filled ${end_filled:-no})"
  if [[ -z $plant_ro && -f $ro/checkpoints/step-000000004/manifest.json ]]; then
    (( $(lines "$ro") == 0 )) || fail "readonly: the attempt ended before the remount"
    mount -o remount,ro "$ro/checkpoints" 2> /dev/null && plant_ro=$(now)
  fi
  if [[ -z $plant_filled && -f $filled/checkpoints/step-000000004/manifest.json ]]; then
    (( $(lines "$filled") == 0 )) || fail "filled: the attempt ended before the disk was filled"
    dd if=/dev/zero of="$work/filled/filler" bs=64k 2> /dev/null
    plant_filled=$(now)
  fi
  if [[ -z $end_filled && -n $plant_filled ]] && (( $(lines "$filled") > 0 )); then
    end_filled=$(now)
    rm -f "$work/filled/filler"  # space again for the retry
  fi
  [[ -z $end_oom ]] && (( $(lines "$oom") > 0 )) && end_oom=$(now)
  [[ -z $end_full ]] && (( $(lines "$full") > 0 )) && end_full=$(now)
  [[ -z $end_ro && -n $plant_ro ]] && (( $(lines "$ro") > 0 )) && end_ro=$(now)
  sleep 0.05
done

# oom: stopped at once.
wait_for 60 "end of oom" ended "$oom"
[[ $(state "$oom") == FAILED ]] || fail "oom: job $(state "$oom"), want FAILED"
[[ $(causes "$oom") == "failed:oom" ]] || fail "oom: ledger '$(causes "$oom")', want failed:oom"
last=$(tail -n 1 "$oom"/logs/slurm-*.err)
# libtorch's allocator says the size it was asked for; a plain operator new (std::bad_alloc),
# which fails first at times, does not.
[[ $last == "hpctrain: the run stopped: oom ("*"host memory ran out"*"; peak RSS of this rank "*"address space limited to 3.0 GiB (ulimit -v)"*"not retried"*"What to do: lower train.batch_size (128 per rank now)"* ]] ||
  fail "oom: the job's last log line: $last"
echo "oom → ulimit -v 3 GiB on submit → $(ledger_field "$oom" 1 cause) → stopped ($(causes "$oom"), job FAILED) → $(since "$plant_oom" "$end_oom") s from submission"
echo "  $last"

# readonly: the end-of-training checkpoint failed; then the retry.
[[ $(ledger_field "$ro" 1 cause) == filesystem ]] ||
  fail "readonly: attempt 1 '$(causes "$ro")' ($(ledger_field "$ro" 1 evidence))"
grep -q "Read-only file system" "$ro"/logs/slurm-*.err || fail "readonly: no EROFS seen"

# full: both attempts, then the job.
wait_for 180 "end of full" ended "$full"
wait_lines "$full" 2 30
[[ $(state "$full") == FAILED ]] || fail "full: job $(state "$full"), want FAILED"
[[ $(causes "$full") == "failed_requeued:filesystem failed:filesystem" ]] ||
  fail "full: ledger '$(causes "$full")' ($(jq -r .evidence "$full/attempts.jsonl" | paste -sd '|'))"
jq -e . "$full/attempts.jsonl" > /dev/null || fail "full: the ledger does not parse"
grep -q "resuming from checkpoint step 4 " "$full"/logs/slurm-* ||
  fail "full: the retry did not resume from the checkpoint written before the disk filled"
[[ -f $full/checkpoints/step-000000004/manifest.json ]] || fail "full: checkpoint 4 is gone"
echo "filesystem (full) → run_dir on a 2600 KiB tmpfs → $(ledger_field "$full" 1 cause) → retried ($(causes "$full"), job FAILED) → $(since "$plant_full" "$end_full") s from submission to the first recorded end"
echo "  attempt 1: $(ledger_field "$full" 1 evidence)"
echo "  attempt 2: $(ledger_field "$full" 2 evidence)"

wait_for 180 "end of filled" ended "$filled"
wait_lines "$filled" 2 30
[[ $(state "$filled") == COMPLETED ]] || fail "filled: job $(state "$filled"), want COMPLETED"
[[ $(causes "$filled") == "failed_requeued:filesystem completed:completed" ]] ||
  fail "filled: ledger '$(causes "$filled")' ($(jq -r .evidence "$filled/attempts.jsonl" | paste -sd '|'))"
jq -e . "$filled/attempts.jsonl" > /dev/null || fail "filled: the ledger does not parse"
grep -q "resuming from checkpoint step 4 " "$filled"/logs/slurm-* ||
  fail "filled: the retry did not resume from the checkpoint written before the disk filled"
retry_s=$(jq -rs '(.[1].start | fromdateiso8601) - (.[0].end | fromdateiso8601)' "$filled/attempts.jsonl")
echo "filesystem (filled by another writer) → dd fills the run_dir's 12 MiB tmpfs after checkpoint 4 → $(ledger_field "$filled" 1 cause) → retried, the filler removed ($(causes "$filled"), job COMPLETED) → $(since "$plant_filled" "$end_filled") s from the fill to the recorded end, the retry started ${retry_s} s after it"
echo "  attempt 1: $(ledger_field "$filled" 1 evidence)"

wait_for 180 "end of readonly" ended "$ro"
wait_lines "$ro" 2 30
[[ $(state "$ro") == FAILED ]] || fail "readonly: job $(state "$ro"), want FAILED"
[[ $(causes "$ro") == "failed_requeued:filesystem failed:filesystem" ]] ||
  fail "readonly: ledger '$(causes "$ro")' ($(jq -r .evidence "$ro/attempts.jsonl" | paste -sd '|'))"
echo "filesystem (read-only) → checkpoints tmpfs remounted ro while training → $(ledger_field "$ro" 1 cause) → retried ($(causes "$ro"), job FAILED) → $(since "$plant_ro" "$end_ro") s from the remount to the recorded end"
echo "  attempt 1: $(ledger_field "$ro" 1 evidence)"
echo "  attempt 2: $(ledger_field "$ro" 2 evidence)"
