#!/usr/bin/env bash
# Training for real under srun, submitted with hpctrain: 2 ranks, CIFAR ResNet-20 on the real
# Fashion-MNIST (Debian's dataset-fashion-mnist), a few dozen steps. Checks what a user relies on:
#   - the job completes and the ledger says so;
#   - the loss decreases (first logged vs last logged);
#   - both ranks end with bitwise identical weights (each rank states its own fingerprint);
#   - rank 0's progress lines and metrics.jsonl are well formed (every field, every line JSON);
#   - evaluation counts the whole test set once across the ranks;
#   - hpctrain status shows the latest figures;
#   - the weights file loads into the Python reference model (torch.load, strict) and gives the
#     same test top-1 as the worker measured.
# Needs HPCTRAIN, WORKER, HPCTRAIN_DATA, PYTHON and SLURM_CONF (the ctest fixture's cluster).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/lib.sh"
: "${WORKER:?}" "${HPCTRAIN_DATA:?}" "${PYTHON:?}"
fmnist=${HPCTRAIN_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
[[ -f $fmnist/train-images-idx3-ubyte.gz ]] || fail "no Fashion-MNIST in $fmnist (dataset-fashion-mnist)"

for part in train t10k; do
  "$HPCTRAIN_DATA" idx --fashion -q --images "$fmnist/$part-images-idx3-ubyte.gz" \
    --labels "$fmnist/$part-labels-idx1-ubyte.gz" -o "$work/$part.h5" > /dev/null \
    || fail "converting $part"
done

steps=30
cat > "$work/train.toml" <<TOML
[job]
name = "train"
profile = "local"
tasks_per_node = 2
time = "00:15:00"
run_dir = "$work/{name}"
worker = "$WORKER"
[data]
train = "$work/train.h5"
val = "$work/t10k.h5"
workers = 1
crop_padding = 2
[model]
arch = "resnet20"
num_classes = 10
[train]
max_steps = $steps
batch_size = 32
channels_last = true
log_every_steps = 5
[train.optimizer]
lr = 0.4
nesterov = true
[train.schedule]
name = "constant"
[checkpoint]
every_steps = 0
[preemption]
signal_lead_s = 60
TOML
run=$work/train
"$HPCTRAIN" check "$work/train.toml" > /dev/null || fail "check: $("$HPCTRAIN" check "$work/train.toml" 2>&1)"
id=$(submit "$work/train.toml")
wait_state "$run" COMPLETED 240
[[ $(ledger_field "$run" 1 reason) == completed ]] || fail "ledger: $(cat "$run/attempts.jsonl")"
log=$run/logs/slurm-$id.out
err=$run/logs/slurm-$id.err

# Progress lines: rank 0 only, one per log interval, every field present.
progress=$(grep -E '^\[rank 0/2 [^]]+\] epoch 1/1 step [0-9]+/'"$steps"' loss [0-9.]+ lr [0-9.]+ images/s [0-9]+ \(steps [0-9]+-[0-9]+\) scale 1 eta [0-9hms]+$' "$log")
[[ $(wc -l <<<"$progress") == $((steps / 5)) ]] || fail "progress lines: $(grep epoch "$log")"
grep -q '^\[rank 1/2' "$log" && fail "rank 1 printed progress"
grep -Eq '^\[rank 0/2 [^]]+\] final: test top-1 [0-9.]+% top-5 [0-9.]+% loss [0-9.]+ \(10000 images\); '"$steps"' steps' "$log" \
  || fail "no final line: $(tail -n 3 "$log")"

# metrics.jsonl: JSON lines with the documented fields.
metrics=$run/metrics.jsonl
jq -e . "$metrics" > /dev/null || fail "metrics.jsonl is not JSON lines"
[[ $(jq -s 'map(select(.kind == "train")) | length' "$metrics") == $((steps / 5)) ]] || fail "train lines"
jq -e -s 'map(select(.kind == "train")) | all(has("step", "epoch", "loss", "lr", "images_per_s", "window_first_step", "window_seconds", "loss_scale", "wall_time"))' "$metrics" > /dev/null \
  || fail "train fields: $(head -n 1 "$metrics")"
jq -e -s 'map(select(.kind == "eval")) | length == 1 and (.[0] | has("top1", "top5", "loss", "step", "epoch", "wall_time") and .samples == 10000)' "$metrics" > /dev/null \
  || fail "eval line: $(grep eval "$metrics")"
first=$(jq -s 'map(select(.kind == "train")) | .[0].loss' "$metrics")
last=$(jq -s 'map(select(.kind == "train")) | .[-1].loss' "$metrics")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' || fail "loss did not decrease: $first -> $last"

# Identical weights on both ranks: each states its own fingerprint.
prints=$(grep -oE '^\[rank [01]/2 [^]]+\] final weights fnv1a64 0x[0-9a-f]+' "$err" | sort)
[[ $(wc -l <<<"$prints") == 2 ]] || fail "fingerprint lines: $(cat "$err")"
[[ $(awk '{print $NF}' <<<"$prints" | sort -u | wc -l) == 1 ]] || fail "ranks differ: $prints"

# hpctrain status: the latest figures.
status=$("$HPCTRAIN" status "$run")
grep -Eq "^train: +step $steps, epoch 1, loss [0-9.]+," <<<"$status" || fail "status: $status"
grep -Eq "^eval: +step $steps, epoch 1, top-1 [0-9.]+%, top-5 [0-9.]+%" <<<"$status" || fail "status: $status"

# Interop: model.pt in the Python reference gives the worker's top-1.
top1=$(jq -s 'map(select(.kind == "eval")) | .[0].top1' "$metrics")
"$PYTHON" - "$run/model.pt" "$work/t10k.h5" "$top1" "$here/../python" <<'PY' || fail "interop"
import sys
import h5py, torch
sys.path.insert(0, sys.argv[4])
from reference_models import build
weights, test, want = sys.argv[1], sys.argv[2], float(sys.argv[3])
model = build("resnet20", num_classes=10, in_channels=1)
model.load_state_dict(torch.load(weights, weights_only=True), strict=True)
model.eval()
with h5py.File(test) as f:
    images = torch.from_numpy(f["images"][:]).permute(0, 3, 1, 2).float() / 255
    labels = torch.from_numpy(f["labels"][:])
with h5py.File(test.replace("t10k", "train")) as f:  # normalised with the training statistics
    mean, std = float(f.attrs["mean"][0]), float(f.attrs["std"][0])
with torch.no_grad():
    pred = torch.cat([model((x - mean) / std).argmax(1) for x in images.split(500)])
got = (pred == labels).float().mean().item()
print(f"interop: PyTorch top-1 {got:.4f}, hpctrain top-1 {want:.4f}")
# The same weights and inputs: at most a couple of near-ties may break differently.
sys.exit(0 if abs(got - want) <= 2 / len(labels) else 1)
PY
echo "ok"
