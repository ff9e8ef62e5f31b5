#!/usr/bin/env python3
"""JPEG training peer for bench/train/gpu.sh: torchvision's ImageNet recipe on one GPU.

ImageFolder + PIL + RandomResizedCrop(SIZE) + RandomHorizontalFlip + PILToTensor in a DataLoader
(--workers processes, pin_memory, persistent_workers, shuffle), non_blocking copies and the
normalisation on the GPU, torchvision's model, AMP (fp16 with a GradScaler, or bf16), SGD
(momentum 0.9), channels_last when asked.

  peer_jpeg.py IMAGE_FOLDER --workers W [--steps 100] [--log-every 10] [--device cuda]

Timing matches hpctrain-worker's metrics: a log window every --log-every steps, ended by reading
the loss (which waits for the GPU), images/s per window; the result is the median of the windows
after the first (the first holds start-up: worker processes, cuDNN's autotuner), and "overall" is
all those windows' images over their time. gpu_busy is, over the same windows, the share of wall
time the GPU spent inside a step: CUDA events around each step (from the input's copy to the
optimizer's update) summed, divided by the windows' wall time. Under 100% the GPU waited for the
input; an input-bound run shows it, a GPU-bound run is near 100%.

--device cpu (with a small --arch/--size/--batch) runs the same code without a GPU, as a smoke
test. Prints one line of key=value pairs at the end.
"""
import argparse
import resource
import statistics
import time

import torch
import torch.nn.functional as F
import torchvision
from torchvision import datasets, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--arch", default="resnet50")
    p.add_argument("--classes", type=int, default=None, help="default: the folder's class count")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--precision", default="fp16", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--workers", type=int, default=14)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def make_loader(a, cuda):
    """The folder as torchvision's recipe reads it; also its class count."""
    tf = transforms.Compose([transforms.RandomResizedCrop(a.size),
                             transforms.RandomHorizontalFlip(), transforms.PILToTensor()])
    data = datasets.ImageFolder(a.dir, transform=tf)
    loader = torch.utils.data.DataLoader(data, batch_size=a.batch, shuffle=True,
                                         num_workers=a.workers, pin_memory=cuda, drop_last=True,
                                         persistent_workers=a.workers > 0)
    return loader, len(data.classes)


def train(a, loader, model, memory_format, device):
    """Runs --steps steps; returns the log windows as (images/s, seconds, GPU seconds or None)
    and the steps run."""
    cuda = device.type == "cuda"
    mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(IMAGENET_STD, device=device).view(1, 3, 1, 1) * 255
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=a.precision == "fp16")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    model.train()

    windows = []        # (images/s, seconds, gpu seconds or None)
    events = []         # this window's (start, end) CUDA events
    step, t_window = 0, time.perf_counter()
    while step < a.steps:
        for x, y in loader:
            if cuda:
                start = torch.cuda.Event(enable_timing=True)
                start.record()
            x = x.to(device, non_blocking=True).float().sub_(mean).div_(std)
            x = x.contiguous(memory_format=memory_format)
            y = y.to(device, non_blocking=True)
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            if cuda:
                end = torch.cuda.Event(enable_timing=True)
                end.record()
                events.append((start, end))
            step += 1
            if step % a.log_every == 0:
                loss.item()           # as a log line: waits for the window's last step
                if cuda:
                    torch.cuda.synchronize()
                now = time.perf_counter()
                gpu_s = sum(s.elapsed_time(e) for s, e in events) / 1e3 if cuda else None
                windows.append((a.log_every * a.batch / (now - t_window), now - t_window, gpu_s))
                events, t_window = [], now
            if step == a.steps:
                break
    return windows, step


def report(a, windows, step, device):
    """The key=value line: the median window after the first, and all of them together."""
    cuda = device.type == "cuda"
    timed = windows[1:]
    if not timed:
        raise SystemExit(f"fewer than 2 log windows ({len(windows)}): raise --steps")
    median = statistics.median(w[0] for w in timed)
    seconds = sum(w[1] for w in timed)
    overall = len(timed) * a.log_every * a.batch / seconds
    busy = f"{100 * sum(w[2] for w in timed) / seconds:.0f}%" if cuda else "n/a"
    gpu_mib = f"{torch.cuda.max_memory_allocated(device) / 2**20:.0f}" if cuda else "n/a"
    print(f"side=pytorch mode=jpeg arch={a.arch} size={a.size} batch={a.batch} "
          f"precision={a.precision} workers={a.workers} threads={torch.get_num_threads()} "
          f"steps={step} windows={len(timed)} images_per_s={median:.1f} "
          f"images_per_s_overall={overall:.1f} gpu_busy={busy} "
          f"windows_images_per_s={','.join(f'{w[0]:.0f}' for w in windows)} "
          f"peak_rss_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} "
          f"gpu_peak_allocated_mib={gpu_mib} torchvision={torchvision.__version__}", flush=True)


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = torch.device(a.device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    loader, folder_classes = make_loader(a, device.type == "cuda")
    model = getattr(torchvision.models, a.arch)(num_classes=a.classes or folder_classes).to(device)
    memory_format = torch.channels_last if a.channels_last else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    windows, step = train(a, loader, model, memory_format, device)
    del loader          # persistent workers exit
    report(a, windows, step, device)

if __name__ == "__main__":
    main()
