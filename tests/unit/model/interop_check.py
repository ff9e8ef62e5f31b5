"""Interop of hpctrain's C++ models with PyTorch/torchvision (ctest: model_interop).

For each configuration below, against torchvision's model (or CifarResNet here, the reference
definition of the CIFAR ResNets):
  names   C++ weights (model_tool's init.pt) load with torch.load(weights_only=True) and have
          exactly the reference state_dict()'s names, order, shapes and dtypes;
  init    with the same seed, C++ initialisation equals the reference's bit for bit (where the
          reference is built as torchvision builds it: not after replacing conv1 for another
          in_channels or stem, which draws from the generator in another order);
  to py   the C++ weights load into the reference with load_state_dict(strict=True) and give
          C++'s eval-mode logits on the same input;
  from py random weights saved with torch.save(state_dict()) load in C++ as pretrained weights,
          bit for bit, and give Python's logits.
Logits agree when max |diff| <= 1e-4 * max(1, max |logits|); the measured differences are
printed.

usage: interop_check.py --tool build/.../model_tool [--only resnet18,...]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision  # noqa: F401  (the reference module needs it)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from reference_models import reference  # noqa: E402

RELATIVE_TOLERANCE = 1e-4
SEED = 20240611


def random_state(model, seed):
    """Random weights and BN statistics for `model`, so eval-mode logits exercise every tensor.
    BN scales below 1 keep the residual stream of the deep networks from growing without bound
    in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            out[name] = torch.randint(1, 10000, (), generator=gen)
        elif name.endswith("running_var"):
            out[name] = torch.rand(t.shape, generator=gen) + 0.5
        elif t.dim() == 1 and name.endswith("weight"):  # BN scale
            out[name] = torch.rand(t.shape, generator=gen) * 0.3 + 0.2
        elif t.dim() == 1:  # BN shift, running_mean, Linear bias
            out[name] = torch.randn(t.shape, generator=gen) * 0.1
        else:  # conv and linear weights, at He scale
            out[name] = torch.randn(t.shape, generator=gen) * (2.0 / t[0].numel()) ** 0.5
    return out


def max_diff(a, b):
    scale = max(1.0, float(b.abs().max()))
    diff = float((a.double() - b.double()).abs().max())
    return diff, scale


def same_tensors(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


CONFIGS = [
    # arch, stem, in_channels, num_classes, image side, extra model_tool flags
    ("resnet18", "imagenet", 3, 1000, 64, []),
    ("resnet18", "imagenet", 1, 10, 64, []),
    ("resnet18", "imagenet", 3, 10, 64, ["--channels-last"]),
    ("resnet18", "cifar", 3, 10, 32, []),
    ("resnet18", "cifar", 1, 10, 28, []),
    ("resnet34", "imagenet", 3, 10, 64, []),
    ("resnet50", "imagenet", 3, 1000, 64, []),
    ("resnet50", "imagenet", 3, 10, 64, ["--zero-init-residual"]),
    ("resnet101", "imagenet", 3, 10, 64, []),
    ("resnet152", "imagenet", 3, 10, 64, []),
    ("alexnet", "imagenet", 3, 1000, 64, []),
    ("alexnet", "imagenet", 1, 10, 64, []),
    ("resnet20", "cifar", 3, 10, 32, []),
    ("resnet20", "cifar", 1, 10, 28, ["--zero-init-residual"]),
    ("resnet32", "cifar", 3, 10, 32, []),
    ("resnet44", "cifar", 3, 10, 32, []),
    ("resnet56", "cifar", 3, 10, 32, []),
    ("resnet110", "cifar", 3, 10, 32, []),
]


def check(tool, work, arch, stem, in_channels, num_classes, side, flags):
    """Returns a list of failures (empty: all checks passed) and the measured numbers."""
    zero_init = "--zero-init-residual" in flags
    torch.manual_seed(SEED)
    ref, comparable_init = reference(arch, stem, in_channels, num_classes, zero_init)
    ref.eval()
    x = torch.randn(2, in_channels, side, side, generator=torch.Generator().manual_seed(SEED))
    torch.save({"x": x}, os.path.join(work, "x.pt"))
    py_state = random_state(ref, SEED + 1)
    py_path = os.path.join(work, "py.pt")
    torch.save(py_state, py_path)

    cmd = [tool, "--arch", arch, "--stem", stem, "--in-channels", str(in_channels),
           "--num-classes", str(num_classes), "--seed", str(SEED), "--input",
           os.path.join(work, "x.pt"), "--out-dir", work, "--pretrained", py_path] + flags
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return [f"model_tool failed ({run.returncode}): {run.stderr.strip()}"], {}

    # names: order, shapes, dtypes; the file must load with weights_only=True.
    failures = []
    ref_init = ref.state_dict()
    ref_keys = list(ref_init.keys())
    cpp_init = torch.load(os.path.join(work, "init.pt"), weights_only=True)
    if list(cpp_init.keys()) != ref_keys:
        extra = [k for k in cpp_init if k not in ref_init][:10]
        missing = [k for k in ref_keys if k not in cpp_init][:10]
        failures.append(f"names differ: C++ only {extra}, Python only {missing}"
                        if extra or missing else "same names, different order")
    else:
        for k in ref_keys:
            if cpp_init[k].shape != ref_init[k].shape or cpp_init[k].dtype != ref_init[k].dtype:
                failures.append(f"{k}: C++ {tuple(cpp_init[k].shape)} {cpp_init[k].dtype}, "
                                f"Python {tuple(ref_init[k].shape)} {ref_init[k].dtype}")
    if failures:
        return failures, {}

    # init: bit for bit where the reference draws in torchvision's order.
    init_equal = all(same_tensors(cpp_init[k], ref_init[k]) for k in ref_keys)
    if comparable_init and not init_equal:
        bad = [k for k in ref_keys if not same_tensors(cpp_init[k], ref_init[k])][:5]
        failures.append(f"same seed, different initial weights: {bad}")

    # to py: C++ weights into the reference, strict.
    ref.load_state_dict(cpp_init, strict=True)
    with torch.no_grad():
        py_from_cpp = ref(x)
    cpp_logits = torch.load(os.path.join(work, "init_logits.pt"), weights_only=True)["logits"]
    to_py, to_py_scale = max_diff(cpp_logits, py_from_cpp)
    if to_py > RELATIVE_TOLERANCE * to_py_scale:
        failures.append(f"C++ weights in Python: logits differ by {to_py:.3g} "
                        f"(scale {to_py_scale:.3g})")

    # from py: torch.save'd weights as C++ pretrained weights (model_tool checked that every
    # tensor arrived bit for bit).
    ref.load_state_dict(py_state, strict=True)
    with torch.no_grad():
        py_logits = ref(x)
    cpp_pre_logits = torch.load(
        os.path.join(work, "pretrained_logits.pt"), weights_only=True)["logits"]
    from_py, from_py_scale = max_diff(cpp_pre_logits, py_logits)
    if from_py > RELATIVE_TOLERANCE * from_py_scale:
        failures.append(f"Python weights in C++: logits differ by {from_py:.3g} "
                        f"(scale {from_py_scale:.3g})")
    return failures, {"init": "equal" if init_equal else ("DIFFERS" if comparable_init else "n/a"),
                      "to_py": to_py, "to_py_scale": to_py_scale,
                      "from_py": from_py, "from_py_scale": from_py_scale}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True)
    parser.add_argument("--only", default="", help="comma-separated architectures")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    # One thread here and in model_tool: beside other builds, competing OpenMP threads make a
    # forward pass many times slower.
    torch.set_num_threads(1)
    failed = 0
    print(f"{'configuration':<44} {'init':<6} {'C++->Py max|diff| (scale)':<28} "
          f"{'Py->C++ max|diff| (scale)':<28} time")
    with tempfile.TemporaryDirectory(prefix="hpctrain-interop-") as work:
        for arch, stem, in_ch, classes, side, flags in CONFIGS:
            if only and arch not in only:
                continue
            name = f"{arch} {stem} in={in_ch} classes={classes} {side}px {' '.join(flags)}"
            start = time.monotonic()
            failures, m = check(args.tool, work, arch, stem, in_ch, classes, side, flags)
            took = time.monotonic() - start
            if m:
                print(f"{name:<44} {m['init']:<6} "
                      f"{m['to_py']:<10.3g} ({m['to_py_scale']:<8.3g}){'':<7} "
                      f"{m['from_py']:<10.3g} ({m['from_py_scale']:<8.3g}){'':<7} {took:.1f}s")
            else:
                print(f"{name:<44} {'':<64} {took:.1f}s")
            for failure in failures:
                print(f"  FAIL: {failure}")
            failed += bool(failures)
    print(f"interop: {len(CONFIGS) if not only else 'selected'} configurations, {failed} failed "
          f"(tolerance: max |diff| <= {RELATIVE_TOLERANCE:g} * max(1, max |logits|))")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
