"""hpctrain's optimizers and learning-rate schedules against torch.optim on the same inputs
(ctest: train_optimizer_interop). train_tool writes initial parameters, the gradients of each step,
its learning rates and its parameters after each step; this replays the same with torch.optim.SGD /
AdamW (parameter groups as hpctrain forms them) and torch.optim.lr_scheduler, and compares.
Tolerance: |diff| <= 1e-6 x max(1, |p|) on parameters (float32 arithmetic in a different order:
SGD agrees bitwise, AdamW to a few ulps), 1e-12 on learning rates.

usage: optimizer_interop.py --tool build/.../train_tool
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile

import torch

CASES = {
    "sgd": dict(kind="sgd", momentum=0.0, weight_decay=0.0, nesterov=False, decay_bn_bias=True),
    "sgd_momentum_wd": dict(kind="sgd", momentum=0.9, weight_decay=5e-4, nesterov=False,
                            decay_bn_bias=True),
    "sgd_nesterov_no_bn_decay": dict(kind="sgd", momentum=0.9, weight_decay=1e-2, nesterov=True,
                                     decay_bn_bias=False),
    "adamw": dict(kind="adamw", weight_decay=0.05, decay_bn_bias=True),
    "adamw_no_bn_decay": dict(kind="adamw", weight_decay=0.05, decay_bn_bias=False),
}
STEPS = 6
failures = []


def check(what, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
    if not ok:
        failures.append(what)


def torch_schedule_lrs(opt, steps, warmup, scheduler_after):
    lrs = []
    if warmup:
        warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1 / warmup, end_factor=1.0,
                                                 total_iters=warmup - 1)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, scheduler_after(opt)],
                                                      milestones=[warmup])
    else:
        sched = scheduler_after(opt)
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "record.pt")
        subprocess.run([args.tool, "--out", path], check=True)
        rec = torch.load(path, weights_only=True)

    # Schedules: warmup 2 then cosine to 0.01 over 6 steps, base 0.2.
    dummy = [torch.zeros(1, requires_grad=True)]
    opt = torch.optim.SGD(dummy, lr=0.2)
    want = torch_schedule_lrs(opt, STEPS, 2, lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(
        o, T_max=STEPS - 2, eta_min=0.01))
    got = rec["schedule/cosine"].tolist()
    diff = max(abs(a - b) for a, b in zip(got, want))
    check("schedule cosine (LinearLR + CosineAnnealingLR)", diff < 1e-12, f"max |diff| {diff:.2e}")
    # Step and multistep: epochs of 3 steps, decays at absolute epochs (step_size 2; [3, 7]).
    for name, make in [("step", lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2 * 3,
                                                                          gamma=0.5)),
                       ("multistep", lambda o: torch.optim.lr_scheduler.MultiStepLR(
                           o, milestones=[3 * 3, 7 * 3], gamma=0.5))]:
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.2)
        want = torch_schedule_lrs(opt, 30, 0, make)
        got = rec[f"schedule/{name}"].tolist()
        diff = max(abs(a - b) for a, b in zip(got, want))
        check(f"schedule {name}", diff < 1e-12, f"max |diff| {diff:.2e}")

    lrs = rec["schedule/cosine"].tolist()
    for case, cfg in CASES.items():
        params = {n: rec[f"{case}/init/{n}"].clone().requires_grad_() for n in ("w", "b")}
        decayed = [params["w"]] + ([params["b"]] if cfg["decay_bn_bias"] else [])
        exempt = [] if cfg["decay_bn_bias"] else [params["b"]]
        groups = [{"params": decayed, "weight_decay": cfg["weight_decay"]}]
        if exempt:
            groups.append({"params": exempt, "weight_decay": 0.0})
        if cfg["kind"] == "sgd":
            opt = torch.optim.SGD(groups, lr=lrs[0], momentum=cfg["momentum"],
                                  nesterov=cfg["nesterov"])
        else:
            opt = torch.optim.AdamW(groups, lr=lrs[0], betas=(0.9, 0.99), eps=1e-8)
        worst = 0.0
        for k in range(STEPS):
            for g in opt.param_groups:
                g["lr"] = lrs[k]
            for n, t in params.items():
                t.grad = rec[f"{case}/grad/{k}/{n}"].clone()
            opt.step()
            for n, t in params.items():
                ours = rec[f"{case}/after/{k}/{n}"]
                rel = float(((t.detach() - ours).abs() / ours.abs().clamp_min(1.0)).max())
                worst = max(worst, rel)
        check(f"optimizer {case} ({STEPS} steps)", worst <= 1e-6,
              f"max |diff| / max(1, |p|) {worst:.2e}")
    if failures:
        print(f"{len(failures)} failed: {', '.join(failures)}")
        sys.exit(1)
    print("optimizer and schedule interop: all agree")


if __name__ == "__main__":
    main()
