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
#             mean of the 3 saved models and of their optimizer states (momentum buffers; bit for
#             bit, computed here from the checkpoint's files); then the same stopped run resumed
#             on 2 ranks to the end, equal weights on both
#   evaluate  with a validation set, evaluated at each epoch's end while the ranks are apart (2
#             local steps since the last averaging): every rank evaluates the same weights, and
#             the last evaluation's are the final (averaged) weights
#   mismatch  an all-reduce run's checkpoint resumed with local_sgd: refused, naming train.sync,
#             exit status not 0, the checkpoint untouched
# The resume at a step between averagings, bitwise, and every piece of local SGD's state is in
# resume_ablation.sh.
#   local_sgd.sh WORKER PYTHON (the pinned torch wheel's) DATA (hpctrain-data)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=$2
data=$3
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
  launch_to_stop resize-3 3 "$work/resize-3.log" $((10 + RANDOM % 20))
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
# Its finished checkpoint holds what each of the 2 ranks started from: rank 0's optimizer.pt and
# rank 1's local-rank-1.pt.
"$python" - "$work/resize-base/checkpoints" "$work/resize-start/model.pt" \
  "$work/resize-start/checkpoints" <<'PY' \
  || fail "resize: the resumed ranks did not start from the mean of the saved ones"
import glob, os, sys, torch
step = sorted(glob.glob(os.path.join(sys.argv[1], "step-*")))[-1]
def part(path, prefix):
    return {k[len(prefix):]: v for k, v in torch.load(path, weights_only=True).items()
            if k.startswith(prefix)}
ranks = [torch.load(f"{step}/model.pt", weights_only=True)]
opts = [torch.load(f"{step}/optimizer.pt", weights_only=True)]
for r in (1, 2):
    ranks.append(part(f"{step}/local-rank-{r}.pt", "model."))
    opts.append(part(f"{step}/local-rank-{r}.pt", "optimizer."))
def mean(states, k):
    return states[0][k].clone().add_(states[1][k]).add_(states[2][k]).div_(3)
got = torch.load(sys.argv[2], weights_only=True)
apart = sum(not torch.equal(ranks[0][k], ranks[1][k]) for k in ranks[0])
assert apart > 0, "the saved ranks were equal: not a step between averagings"
for k, v in got.items():
    if not v.is_floating_point():
        continue
    assert torch.equal(v, mean(ranks, k)), f"{k}: not the mean of the 3 saved ranks"
# The optimizer states: momentum buffers, apart between the saved ranks, the mean on both new ones.
# (The resumed run numbers its steps by its own global batch: its checkpoint is the one the
# stopped run did not have, whatever its number.)
before = {os.path.basename(p) for p in glob.glob(os.path.join(sys.argv[1], "step-*"))}
mine = [p for p in glob.glob(os.path.join(sys.argv[3], "step-*")) if os.path.basename(p) not in before]
assert len(mine) == 1, f"the resume saved {len(mine)} checkpoints, want its finished one"
started = mine[0]
new = [torch.load(f"{started}/optimizer.pt", weights_only=True),
       part(f"{started}/local-rank-1.pt", "optimizer.")]
buffers = [k for k in opts[0] if k.endswith(".momentum_buffer")]
assert buffers and all(set(o) == set(opts[0]) for o in opts + new), "optimizer entries differ"
opt_apart = sum(not torch.equal(opts[0][k], opts[1][k]) for k in buffers)
assert opt_apart > 0, "the saved ranks' momentum buffers were equal: nothing to tell apart"
for r, state in enumerate(new):
    for k in buffers:
        assert torch.equal(state[k], mean(opts, k)), \
            f"rank {r}: {k} is not the mean of the 3 saved ranks' (taken from one rank?)"
print(f"resize: {os.path.basename(step)}, {apart} model entries and {opt_apart} momentum buffers "
      f"apart across the 3 saved ranks; the 2 resumed ranks started from their mean, bit for bit "
      f"({os.path.basename(started)})")
PY
make_spec resize-3 train.sync=local_sgd train.sync_every_steps=4 train.batch_size=8
run resize-3 2
grep -q "averaged for 2 ranks" "$work/resize-3.log.rank0" || fail "resize: no averaging on resume"
echo "resize: stopped at step $stopped_at on 3 ranks, finished on 2: $(fingerprint "$work/resize-3.log")"

# --- evaluate: an evaluation at each epoch's end (step 32 and 64), 2 local steps after the last
# averaging (H = 5); the eval records in metrics.jsonl and every rank's weights at each.
"$data" synthetic --samples 64 --size 16 --channels 3 --classes 10 -q -o "$work/val.h5" \
  > /dev/null || fail "evaluate: making the validation set"
make_spec evaluate train.sync=local_sgd train.sync_every_steps=5 train.eval_every_epochs=1
sed -i "s|^synthetic = true|synthetic = true\nval = \"$work/val.h5\"|" "$work/evaluate.toml"
run evaluate 2
for at in 32 64; do
  fingers=$(grep -ohE "weights evaluated at step $at fnv1a64 0x[0-9a-f]+" "$work"/evaluate.log.rank? \
    | awk '{print $NF}' | sort -u)
  [[ $(grep -c . <<< "$fingers") == 1 ]] \
    || fail "evaluate: the ranks evaluated different weights at step $at: $fingers"
  grep -qE "\"kind\":\"eval\".*\"step\":$at[,}]" "$work/evaluate/metrics.jsonl" \
    || fail "evaluate: no eval record at step $at"
done
final=$(fingerprint "$work/evaluate.log")
[[ $fingers == "$final" ]] \
  || fail "evaluate: the last evaluation saw $fingers, the final (averaged) weights are $final"
echo "evaluate: at steps 32 and 64 (2 local steps after an averaging) both ranks evaluated the" \
     "same weights; the last evaluation's are the final weights $final"

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
