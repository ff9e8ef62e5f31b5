#!/usr/bin/env bash
# The hang watchdog (docs/resilience.md "Hangs") against a rank that stops answering entirely, as
# one stuck in the kernel on a dead filesystem does: SIGSTOP, so its heartbeat is silent too. 3
# worker processes, hang_timeout_s = 4, heartbeat_timeout_s = 30 (so the hang verdict, not the
# heartbeat's, ends the step). Rank 1 sleeps 1.5 s in every data wait, so that each of its steps
# holds a beat (one a second) publishing where it is, and is stopped as it leaves the data wait of
# its 6th step. Every other rank must
#   - name rank 1 "silent" with the step it stopped at (as published by its last beat, give or take
#     a step for a late beat; not "start-up at step 0"),
#   - exit 77 within hang_timeout_s + 10 s of the stop: nobody waits for stacks a stopped process
#     cannot print (the old code waited 70 s for them),
#   - and rank 0 must write the hang record with rank 1 and its host, for the step supervisor.
#   hang_silent.sh WORKER
source "$(dirname "$0")/resume_lib.sh" "$1"
timeout_s=4
victim=1
slow_s=1.5
stop_after=5

spec silent
sed -i "s/^tasks_per_node = 2/tasks_per_node = 3/" "$work/silent.toml"
sed -i "s/^epochs = 2/epochs = 20/" "$work/silent.toml"
cat >> "$work/silent.toml" <<TOML
[resilience]
hang_timeout_s = $timeout_s
heartbeat_timeout_s = 30
TOML

# The stopped rank is killed and resumed on the way out (cleanup kills the rest).
thaw() {
  [[ -n ${pids[$victim]:-} ]] || return 0
  kill -KILL "${pids[$victim]}" 2>/dev/null
  kill -CONT "${pids[$victim]}" 2>/dev/null
}
trap 'thaw; cleanup' EXIT
# Whether process $1 runs (kill -0 also answers for one that exited and was not waited for yet).
runs() { [[ -e /proc/$1/stat && $(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1) != Z ]]; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
seconds() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }  # ms -> "4.6"

HPCTRAIN_TEST_STALL="$victim:every:data:$slow_s" launch silent 3 "$work/silent.log"
wait_for_step "$work/silent.log" "$stop_after" "$victim"
kill -STOP "${pids[$victim]}"
stopped_at=$(now_ms)
# The steps it had completed when it stopped: its trace's last batch is read after them, as it
# leaves the data wait it slept in with that step published.
real_step=$(tail -n 1 "$work/silent.log.trace.rank-$victim" | cut -d' ' -f2)
limit=$((timeout_s + 10))

# Polled, so that a rank still waiting fails the test at the limit instead of holding it.
survivors=(0 2)
for r in "${survivors[@]}"; do
  while runs "${pids[$r]}"; do
    (( $(now_ms) - stopped_at <= limit * 1000 )) ||
      fail "rank $r still runs $(seconds $(($(now_ms) - stopped_at))) s after rank $victim stopped (limit $limit s)"
    sleep 0.1
  done
  elapsed_ms=$(($(now_ms) - stopped_at))
  wait "${pids[$r]}"
  status=$?
  [[ $status == 77 ]] || fail "rank $r exited $status, expected 77"
done
elapsed=$(seconds "$elapsed_ms")
thaw
wait "${pids[$victim]}" 2>/dev/null
pids=()

# "rank 1 (node) silent for 4.6 s (no heartbeat; last heard in data wait at step 5); the others
# wait: ranks 0, 2 in all-reduce ...", or, where the two survivors stand in different places (one
# a step further, past the agreement that is read a step late), "...: rank 2 in agreement at step
# 5, rank 0 in all-reduce bucket 0 at step 6"
waiting="(ranks 0, 2 in |rank [02] in [a-z0-9 -]+ at step [0-9]+, rank [02] in )"
pattern="hang: no progress for [0-9.]+ s \\(hang timeout $timeout_s s\\): rank $victim \\([^)]+\\) silent for [0-9.]+ s \\(no heartbeat; last heard in [a-z0-9 -]+ at step ([0-9]+)\\); the others wait: $waiting"
for r in "${survivors[@]}"; do
  line=$(grep -oE "$pattern" "$work/silent.log.rank$r") ||
    fail "rank $r does not name rank $victim as silent with its last step: $(grep -h 'hang:' "$work/silent.log.rank$r")"
  [[ $line =~ at\ step\ ([0-9]+)\)\; ]] || fail "rank $r: no step in '$line'"
  named_step=${BASH_REMATCH[1]}
  (( named_step >= real_step - 1 && named_step <= real_step + 1 && named_step > 0 )) ||
    fail "rank $r names step $named_step; rank $victim stopped at step $real_step"
  ! grep -q 'the threads of this rank' "$work/silent.log.rank$r" ||
    fail "rank $r, not named, printed its stacks"
done
grep -q 'start-up at step' "$work"/silent.log.rank{0,2} && fail "a survivor names a start-up"

# Rank 0's record for the step supervisor: the stopped rank and its node.
jq -e -s --argjson r "$victim" 'map(select(.kind == "hang")) | length == 1 and .[0].ranks == [$r] and
    (.[0].hosts | length == 1 and .[0] != "") and (.[0].message | test("rank \($r) .* silent for"))' \
  "$work/silent/metrics.jsonl" > /dev/null ||
  fail "the hang record: $(grep hang "$work/silent/metrics.jsonl")"

echo "silent: rank $victim stopped after step $real_step; ranks 0 and 2 exited 77 after $elapsed s (limit $limit s), naming it silent at step $named_step:"
grep -ohE 'hang: .*' "$work/silent.log.rank0" | head -n 1 | cut -c1-300
