#!/usr/bin/env bash
# SIGKILL fault test of the checkpoint store (ctest: checkpoint_sigkill, label integration).
# Each trial starts ckpt_kill_tool saving checkpoints in a loop (resuming after the newest
# committed step), kills it with SIGKILL at a random moment, then runs its load mode, which
# cleans leftovers and checks that the loaded step holds, byte for byte, what was saved at that
# step. The loaded step must be the last one the tool reported committed, or the one after it
# (killed between the commit point and the report); never older, never anything else.
# Usage: kill_test.sh CKPT_KILL_TOOL   (TRIALS=60, SEED=random, MAX_SLEEP_MS=300)
set -euo pipefail
tool=$1
trials=${TRIALS:-60}
seed=${SEED:-$((RANDOM * 32768 + RANDOM))}
max_sleep_ms=${MAX_SLEEP_MS:-300}
work=$(mktemp -d "${TMPDIR:-/var/tmp}/hpctrain-ckpt-kill.XXXXXX")
trap 'rm -rf "$work"' EXIT
dir=$work/checkpoints

loaded_before=0  # 0: nothing committed yet
between=0 mid_save=0 after_commit_point=0 no_commit=0
start=$SECONDS
for ((t = 1; t <= trials; t++)); do
  "$tool" save "$dir" "$seed" > "$work/out" 2> "$work/err" &
  pid=$!
  sleep "$(printf '%d.%03d' 0 $((RANDOM % max_sleep_ms)))"
  kill -KILL "$pid"
  status=0
  { wait "$pid"; } 2> /dev/null || status=$?  # without bash's "Killed" line
  if (( status != 137 )); then
    echo "trial $t: the tool ended with status $status before it was killed:" >&2
    cat "$work/err" >&2
    exit 1
  fi
  last=$(awk -v base="$loaded_before" '$1 == "committed" {n = $2} END {print (n ? n : base)}' \
    "$work/out")
  if ! result=$("$tool" load "$dir" "$seed" 2> "$work/err"); then
    echo "trial $t (seed $seed): load failed:" >&2
    cat "$work/err" >&2
    exit 1
  fi
  read -r _ loaded _ removed <<< "$result"
  [[ $loaded == none ]] && loaded=0
  (( last == loaded_before )) && no_commit=$((no_commit + 1))
  if (( loaded == last + 1 )); then
    after_commit_point=$((after_commit_point + 1))
  elif (( loaded == last && removed > 0 )); then
    mid_save=$((mid_save + 1))
  elif (( loaded == last )); then
    between=$((between + 1))
  else
    echo "trial $t (seed $seed): loaded step $loaded, but the tool reported $last committed" >&2
    exit 1
  fi
  loaded_before=$loaded
done
echo "checkpoint_sigkill: $trials trials in $((SECONDS - start)) s (seed $seed), all loads" \
     "from a committed step with the bytes saved at that step:"
echo "  $mid_save killed during a save (its leftovers removed, the previous step loaded)"
echo "  $after_commit_point killed after the commit point, before reporting it (that step loaded)"
echo "  $between killed between saves (the last reported step loaded)"
echo "  $no_commit trials committed nothing before the kill; step $loaded_before reached"
