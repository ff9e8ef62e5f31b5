#!/usr/bin/env python3
"""PyTorch peer for bench/train: the same training as hpctrain-worker, in eager PyTorch.

  synthetic  one process, random images of the given size generated once (as data.synthetic),
             the same model, batch, precision, channels_last and thread count; prints images/s.
             With --compile (none, default, reduce-overhead): the recipe of gpu.sh's compile
             rows, what a PyTorch user gets from torch.compile: the model through
             torch.compile(model, mode=...) (none: eager, the same recipe otherwise), fused SGD,
             the images converted to channels_last once instead of every step; the warm-up
             steps, compilation and CUDA graph recording included, are timed apart (compile_s).
  gpu        one process on one GPU reading an HDF5 file the way a tuned PyTorch job does: a
             DataLoader (--workers processes, pin_memory) hands uint8 HWC batches, copied with
             non_blocking and normalised on the GPU (channels_last when asked), AMP (fp16 with a
             GradScaler, or bf16); prints images/s after --warmup steps and the peak GPU memory.
  ddp        one process per rank under torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR,
             MASTER_PORT) or srun's (SLURM_PROCID, SLURM_NTASKS, MASTER_ADDR, MASTER_PORT):
             DistributedDataParallel (gloo) over a DataLoader that reads the HDF5 files with
             h5py and applies the same augmentation (pad + random crop + horizontal flip) and
             normalisation; SGD (momentum 0.9, Nesterov, weight decay, BN/bias decayed as
             hpctrain's default), linear warmup then cosine per step, the linear scaling rule;
             evaluates the whole test set at the end (rank 0); prints images/s and top-1.

Every run ends with one line: key=value pairs (images_per_s, top1, peak_rss_mib, threads, ...).
"""
import argparse
import math
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "python"))
from reference_models import build  # noqa: E402  (torchvision's models and the CIFAR ResNets)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def children_peak_rss_mib():
    """The largest peak RSS of the child processes waited for so far (DataLoader workers once
    shut down)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def autocast(precision, device="cpu"):
    if precision == "fp32":
        return torch.autocast(device, enabled=False)
    return torch.autocast(device, dtype=torch.float16 if precision == "fp16" else torch.bfloat16)


def count_kernels(step, k, device, sync):
    """Step k once more under the profiler: the device activities it launches (kernels, copies,
    memsets; on a CPU the operators, a smoke test), the figure gpu.sh's graphs rows compare."""
    from torch.profiler import ProfilerActivity, profile
    cuda = device.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        step(k)
        sync()
    kind = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    return sum(1 for e in prof.events() if e.device_type == kind)


def synthetic(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = build(args.arch, num_classes=args.classes, in_channels=args.channels,
                  stem=args.stem).to(device)
    images = torch.randn(args.samples, args.channels, args.size, args.size, device=device)
    labels = torch.randint(0, args.classes, (args.samples,), device=device)
    recipe = args.compile is not None  # the compile rows' recipe (the docstring)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        if recipe:  # a batch sliced from it stays channels_last: no copy per step
            images = images.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4,
                          fused=True if recipe else None)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    model.train()
    net = model
    if args.compile not in (None, "none"):
        # To stderr (gpu.sh's bench.log): graph breaks, recompiles, and what CUDA graph trees
        # recorded or skipped and why; a few lines, none in the timed steps unless they re-record.
        torch._logging.set_logs(graph_breaks=True, recompiles=True, cudagraphs=True)
        net = torch.compile(model, mode=args.compile)
    # CUDA graph trees start a new iteration at each call of the compiled model once the previous
    # backward ran, which holds here; the mark makes it explicit.
    graphs = args.compile == "reduce-overhead" and device.type == "cuda"
    b = args.batch
    batches = args.samples // b

    def step(k):
        x = images[(k % batches) * b:(k % batches + 1) * b]
        y = labels[(k % batches) * b:(k % batches + 1) * b]
        if args.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        opt.zero_grad(set_to_none=True)
        with autocast(args.precision, device.type):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    sync()
    t_warm = time.perf_counter()
    for k in range(args.warmup):
        step(k)
    sync()
    t0 = time.perf_counter()
    for k in range(args.steps):
        step(args.warmup + k)
    sync()
    seconds = time.perf_counter() - t0
    extra = ""
    if args.count_kernels:
        extra += f" kernels_per_step={count_kernels(step, args.warmup + args.steps, device, sync)}"
    if recipe:
        extra += (f" compile={args.compile} compile_s={t0 - t_warm:.1f} warmup={args.warmup}"
                 f" fused_sgd=1")
        if net is not model:
            # What dynamo compiled (1 graph: no graph break) and whether inductor left any of
            # it out of CUDA graphs (it logs why; the row is then not all graphs).
            from torch._dynamo.utils import counters
            extra += (f" graphs={counters['stats']['unique_graphs']}"
                      f" cudagraph_skips={counters['inductor']['cudagraph_skips']}")
    print(f"side=pytorch mode=synthetic arch={args.arch} batch={b} precision={args.precision} "
          f"threads={torch.get_num_threads()} steps={args.steps} "
          f"images_per_s={args.steps * b / seconds:.1f} peak_rss_mib={peak_rss_mib():.0f}"
          f"{gpu_peak(device)}{extra}", flush=True)


def gpu_peak(device):
    if device.type != "cuda":
        return ""
    return f" gpu_peak_allocated_mib={torch.cuda.max_memory_allocated(device) / 2**20:.0f}"


class H5Uint8(torch.utils.data.Dataset):
    """Samples as stored: uint8 H x W x C and the label (normalisation happens on the GPU)."""

    def __init__(self, path):
        import h5py
        self.path = path
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])
            self.mean = np.asarray(f.attrs["mean"], dtype=np.float32)
            self.std = np.asarray(f.attrs["std"], dtype=np.float32)
        self.f = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:  # h5py handles must not cross fork(): one per worker
            import h5py
            self.f = h5py.File(self.path, "r")
        return torch.from_numpy(self.f["images"][i]), int(self.f["labels"][i])


def gpu(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if args.device == "cpu" else args.device)
    if os.environ.get("PEER_GPU_MODE_ON_CPU") == "1":  # a smoke test of this code without a GPU
        device = torch.device("cpu")
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    data = H5Uint8(args.train)
    c = len(data.mean)
    mean = torch.tensor(data.mean * 255, device=device).view(1, c, 1, 1)
    std = torch.tensor(data.std * 255, device=device).view(1, c, 1, 1)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers, pin_memory=cuda,
                                         drop_last=True, persistent_workers=args.workers > 0,
                                         prefetch_factor=4 if args.workers > 0 else None)
    model = build(args.arch, num_classes=args.classes, in_channels=c, stem=args.stem).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    model.train()
    done, t0 = 0, None
    while done < args.warmup + args.steps:
        for x, y in loader:
            if done == args.warmup:
                sync()
                t0 = time.perf_counter()
            if done == args.warmup + args.steps:
                break
            x = x.to(device, non_blocking=True).permute(0, 3, 1, 2).float()
            x = x.sub_(mean).div_(std)
            x = x.contiguous(memory_format=torch.channels_last if args.channels_last
                             else torch.contiguous_format)
            y = y.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with autocast(args.precision, device.type):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            done += 1
    sync()
    seconds = time.perf_counter() - t0
    del loader  # the workers exit: their peak RSS becomes readable
    print(f"side=pytorch mode=gpu arch={args.arch} batch={args.batch} precision={args.precision} "
          f"threads={torch.get_num_threads()} workers={args.workers} steps={args.steps} "
          f"images_per_s={args.steps * args.batch / seconds:.1f} peak_rss_mib={peak_rss_mib():.0f} "
          f"loader_peak_rss_mib={children_peak_rss_mib():.0f}{gpu_peak(device)}", flush=True)


class H5Images(torch.utils.data.Dataset):
    def __init__(self, path, train, pad):
        import h5py
        self.path, self.train, self.pad = path, train, pad
        with h5py.File(path, "r") as f:
            self.n = len(f["labels"])
            self.h, self.w, c = f["images"].shape[1:]
            self.mean = torch.tensor(f.attrs["mean"], dtype=torch.float32).view(c, 1, 1)
            self.std = torch.tensor(f.attrs["std"], dtype=torch.float32).view(c, 1, 1)
        self.f = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.f is None:  # h5py handles must not cross fork(): one per worker
            import h5py
            self.f = h5py.File(self.path, "r")
        img = self.f["images"][i]
        label = int(self.f["labels"][i])
        if self.train:
            p = self.pad
            padded = np.pad(img, ((p, p), (p, p), (0, 0)))
            y, x = np.random.randint(0, 2 * p + 1, size=2)
            img = padded[y:y + self.h, x:x + self.w]
            if np.random.rand() < 0.5:
                img = img[:, ::-1]
        chw = torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1)
        return (chw.float() / 255.0 - self.mean) / self.std, label


def ddp(args):
    env = os.environ
    rank = int(env.get("RANK", env.get("SLURM_PROCID", 0)))
    world = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", 1)))
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    train_set = H5Images(args.train, train=True, pad=args.pad)
    sampler = torch.utils.data.distributed.DistributedSampler(train_set, world, rank, shuffle=True,
                                                              seed=args.seed, drop_last=True)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args.batch, sampler=sampler,
                                         num_workers=args.workers, drop_last=True,
                                         persistent_workers=args.workers > 0)
    channels = train_set.mean.shape[0]
    model = build(args.arch, num_classes=args.classes, in_channels=channels, stem=args.stem)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = torch.nn.parallel.DistributedDataParallel(model)
    global_batch = args.batch * world
    base_lr = args.lr * global_batch / args.reference_batch
    opt = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=0.9, nesterov=True,
                          weight_decay=args.weight_decay)
    steps_per_epoch = len(loader)
    total = steps_per_epoch * args.epochs
    warmup = round(args.warmup_epochs * steps_per_epoch)

    def lr_at(step):
        if step < warmup:
            return base_lr * (step + 1) / warmup
        t = (step - warmup) / max(1, total - warmup)
        return 0.5 * base_lr * (1 + math.cos(math.pi * t))

    step = 0
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for x, y in loader:
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            if args.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            opt.zero_grad(set_to_none=True)
            with autocast(args.precision):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            step += 1
    seconds = time.perf_counter() - t0
    top1 = float("nan")
    if rank == 0 and args.test:
        test_set = H5Images(args.test, train=False, pad=0)
        correct = 0
        # The module itself, not the DDP wrapper: its forward broadcasts buffers, a collective
        # that only rank 0 would enter here.
        net = model.module
        net.eval()
        with torch.no_grad():
            for x, y in torch.utils.data.DataLoader(test_set, batch_size=500):
                if args.channels_last:
                    x = x.contiguous(memory_format=torch.channels_last)
                with autocast(args.precision):
                    correct += (net(x).argmax(1) == y).sum().item()
        top1 = correct / len(test_set)
    # Shut the persistent loader workers down (joined, so getrusage counts them): their memory is
    # part of what a rank costs.
    del loader
    rss = torch.tensor([peak_rss_mib(), children_peak_rss_mib()])
    dist.all_reduce(rss, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"side=pytorch mode=ddp arch={args.arch} ranks={world} batch={args.batch} "
              f"threads={torch.get_num_threads()} loader_workers={args.workers} steps={step} "
              f"train_s={seconds:.1f} images_per_s={step * global_batch / seconds:.1f} "
              f"top1={top1:.4f} peak_rss_mib={rss[0].item():.0f} "
              f"loader_peak_rss_mib={rss[1].item():.0f}", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["synthetic", "gpu", "ddp"])
    p.add_argument("--arch", default="resnet20")
    p.add_argument("--stem", default="cifar")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--samples", type=int, default=1024)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--compile", choices=["none", "default", "reduce-overhead"],
                   help="synthetic: the compile rows' recipe, through torch.compile(mode=...) "
                        "or eager (none); unset: the plain eager peer")
    p.add_argument("--count-kernels", action="store_true",
                   help="synthetic: after the timed steps, count one step's kernels (profiler)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train")
    p.add_argument("--test")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--pad", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--reference-batch", type=int, default=256)
    p.add_argument("--warmup-epochs", type=float, default=0.5)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    args = p.parse_args()
    {"synthetic": synthetic, "gpu": gpu, "ddp": ddp}[args.mode](args)


if __name__ == "__main__":
    main()
