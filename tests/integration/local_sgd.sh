#!/usr/bin/env bash
# Local SGD (train.sync = "local_sgd") on real worker processes, CIFAR ResNet-20 on synthetic
# data, checked from the outside (the final weights and the checkpoints, read with torch):
#   h1        sync_every_steps = 1 trains as the all-reduce does (SGD with momentum and weight
#             decay is linear in the gradients): the parameters after 4 steps agree within 1e-4,
#             while H = 4 differs by more (the check can fail)
#   periods   with a checkpoint every step (H = 3 after 2 warm-up steps, Nesterov outer step):
#             at every averaging step every rank holds the same parameters and float buffers,
#             bit for bit, and local_sgd.pt counts 0 local steps; between averagings the ranks'
#             parameters differ and the count is the steps since the last averaging; during the
#             warm-up the parameters are equal (the gradients are all-reduced)
#   resize    stopped between averagings on 3 ranks and resumed on 2: every rank starts from the
#             mean of the 3 saved models (bit for bit, computed here from the checkpoint's files);
#             then the same stopped run resumed on 2 ranks to the end, equal weights on both
#   mismatch  an all-reduce run's checkpoint resumed with local_sgd: refused, naming train.sync,
#             exit status not 0, the checkpoint untouched
# The resume at a step between averagings, bitwise, and every piece of local SGD's state is in
# resume_ablation.sh.
#   local_sgd.sh WORKER PYTHON (the pinned torch wheel's)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$2
source "$here/resume_lib.sh" "$1"

make_spec() {  # make_spec NAME [KEY=VALUE...]: 2 epochs of 32 steps at 2 ranks, 16 per rank
  local name=$1
  shift
  synthetic_spec job.name="$name" job.tasks_per_node=2 job.run_dir="$work/$name" \
    data.synthetic_samples=1024 data.synthetic_image_size=16 train.epochs=2 train.batch_size=16 \
    train.threads=1 train.log_every_steps=1 train.eval_every_epochs=0 train.optimizer.lr=0.05 \
    checkpoint.every_steps=0 "$@" > "$work/$name.toml"
}

run() {  # run NAME RANKS: launches, waits, requires exit 0 on every rank
  launch "$1" "$2" "$work/$1.log"
  finish
  local want
  want=$(printf '0 %.0s' $(seq "$2"))
  [[ "$statuses " == "$want" ]] || fail "$1: exited '$statuses'"
}

# --- h1
constant=(train.max_steps=4 train.schedule.name=constant)
make_spec h1-allreduce "${constant[@]}"
make_spec h1-local "${constant[@]}" train.sync=local_sgd train.sync_every_steps=1
make_spec h1-local4 "${constant[@]}" train.sync=local_sgd train.sync_every_steps=4
for name in h1-allreduce h1-local h1-local4; do run "$name" 2; done
"$python" - "$work" <<'PY' || fail "h1: H = 1 does not train as the all-reduce does"
import sys, torch
work = sys.argv[1]
def params(name):
    d = torch.load(f"{work}/{name}/model.pt", weights_only=True)
    return {k: v for k, v in d.items() if v.is_floating_point() and "running" not in k}
base = params("h1-allreduce")
def diff(name):
    other = params(name)
    return max((base[k] - other[k]).abs().max().item() for k in base)
h1, h4 = diff("h1-local"), diff("h1-local4")
print(f"h1: max |parameter difference| from the all-reduce after 4 steps: H=1 {h1:.3g}, H=4 {h4:.3g}")
assert h1 <= 1e-4, f"H=1 differs by {h1}"
assert h4 > 1e-4, f"H=4 differs by only {h4}: the check could not tell"
PY

# --- periods
make_spec periods train.epochs=1 train.sync=local_sgd train.sync_every_steps=3 \
  train.sync_warmup_steps=2 train.outer_optimizer=nesterov checkpoint.every_steps=1 \
  checkpoint.keep_last=100
run periods 2
"$python" - "$work/periods/checkpoints" <<'PY' || fail "periods: the ranks do not agree as they should"
import glob, os, sys, torch
steps = sorted(glob.glob(os.path.join(sys.argv[1], "step-*")))
assert len(steps) == 32, f"{len(steps)} checkpoints, want 32"
same = differ = 0
for path in steps:
    step = int(path.rsplit("-", 1)[1])
    r0 = torch.load(f"{path}/model.pt", weights_only=True)
    r1 = {k[6:]: v for k, v in torch.load(f"{path}/local-rank-1.pt", weights_only=True).items()
          if k.startswith("model.")}
    local_steps = torch.load(f"{path}/local_sgd.pt", weights_only=True)["local_steps"].item()
    floats = [k for k in r0 if r0[k].is_floating_point()]
    params = [k for k in floats if "running" not in k]
    if step <= 2:  # warm-up: all-reduced gradients
        assert local_steps == 0, f"step {step}: {local_steps} local steps in the warm-up"
        assert all(torch.equal(r0[k], r1[k]) for k in params), f"step {step}: warm-up differs"
        continue
    want = (step - 2) % 3
    assert local_steps == want, f"step {step}: {local_steps} local steps, want {want}"
    equal = [torch.equal(r0[k], r1[k]) for k in (floats if want == 0 else params)]
    if want == 0 or step == 32:
        assert all(equal), f"step {step}: an averaging step, yet the ranks differ"
        same += 1
    else:
        assert not all(equal), f"step {step}: between averagings, yet the ranks are equal"
        differ += 1
print(f"periods: 2 warm-up steps, {same} averaging steps with both ranks bitwise equal, "
      f"{differ} local steps with the ranks apart")
PY

# --- resize: 3 ranks stopped between averagings (outer step none: the mean is the model)
make_spec resize-3 train.sync=local_sgd train.sync_every_steps=4 train.batch_size=8 \
  job.tasks_per_node=3
for attempt in 1 2 3 4 5; do
  rm -rf "$work/resize-3" "$work/resize-3.log".*
  launch resize-3 3 "$work/resize-3.log"
  stop_at_step "$work/resize-3.log" $((10 + RANDOM % 20))
  finish; [[ $statuses == "75 75 75" ]] || fail "resize: the stopped run exited '$statuses'"
  stopped_at=$(grep -ohE 'stopping at step [0-9]+' "$work/resize-3.log.rank0" | grep -oE '[0-9]+$')
  (( stopped_at % 4 != 0 )) && break
  (( attempt < 5 )) || fail "resize: five stops, each on an averaging step"
done
cp -a "$work/resize-3" "$work/resize-base"
# Resumed on 2 ranks with nothing left to train (max_steps 1): the model it ends with is the one
# it started from (the final averaging of two equal models changes no bit).
cp -a "$work/resize-base" "$work/resize-start"
make_spec resize-start train.sync=local_sgd train.sync_every_steps=4 train.max_steps=1
run resize-start 2
grep -q "local SGD: the checkpoint's 3 ranks' models and optimizer states averaged for 2 ranks" \
  "$work/resize-start.log.rank0" || fail "resize: the resume did not say it averaged 3 ranks"
"$python" - "$work/resize-base/checkpoints" "$work/resize-start/model.pt" <<'PY' \
  || fail "resize: the resumed ranks did not start from the mean of the saved ones"
import glob, os, sys, torch
step = sorted(glob.glob(os.path.join(sys.argv[1], "step-*")))[-1]
ranks = [torch.load(f"{step}/model.pt", weights_only=True)]
for r in (1, 2):
    ranks.append({k[6:]: v for k, v in
                  torch.load(f"{step}/local-rank-{r}.pt", weights_only=True).items()
                  if k.startswith("model.")})
got = torch.load(sys.argv[2], weights_only=True)
apart = sum(not torch.equal(ranks[0][k], ranks[1][k]) for k in ranks[0])
assert apart > 0, "the saved ranks were equal: not a step between averagings"
for k, v in got.items():
    if not v.is_floating_point():
        continue
    mean = (ranks[0][k].clone().add_(ranks[1][k]).add_(ranks[2][k])).div_(3)
    assert torch.equal(v, mean), f"{k}: not the mean of the 3 saved ranks"
print(f"resize: {os.path.basename(step)}, {apart} entries apart across the 3 saved ranks; "
      f"the 2 resumed ranks started from their mean, bit for bit")
PY
make_spec resize-3 train.sync=local_sgd train.sync_every_steps=4 train.batch_size=8
run resize-3 2
grep -q "averaged for 2 ranks" "$work/resize-3.log.rank0" || fail "resize: no averaging on resume"
echo "resize: stopped at step $stopped_at on 3 ranks, finished on 2: $(fingerprint "$work/resize-3.log")"

# --- mismatch
make_spec mismatch checkpoint.every_steps=10 train.max_steps=20
run mismatch 2
before=$(cd "$work/mismatch/checkpoints" && find . -type f -exec md5sum {} + | sort)
make_spec mismatch checkpoint.every_steps=10 train.max_steps=40 train.sync=local_sgd
launch mismatch 2 "$work/mismatch-local.log"
finish
[[ $statuses != "0 0" ]] || fail "mismatch: a local_sgd run resumed an all-reduce checkpoint"
grep -q 'sync: checkpoint null, spec "local_sgd"' "$work/mismatch-local.log.rank0" \
  || fail "mismatch: the error does not name train.sync"
after=$(cd "$work/mismatch/checkpoints" && find . -type f -exec md5sum {} + | sort)
[[ $before == "$after" ]] || fail "mismatch: the refused resume changed the checkpoints"
echo "mismatch: refused ($statuses), naming train.sync; the checkpoints unchanged"
echo "local SGD: all cases passed"
