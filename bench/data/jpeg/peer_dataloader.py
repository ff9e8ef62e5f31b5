#!/usr/bin/env python3
"""JPEG peer (a): the PyTorch DataLoader with PIL, as in torchvision's ImageNet recipe. Decodes
JPEGs from an ImageFolder and applies RandomResizedCrop(224) + RandomHorizontalFlip, then
PILToTensor (uint8 NCHW; the C++ loader's uint8 NHWC output holds the same bytes) or, with
--float, ToTensor + Normalize(ImageNet mean/std) (float32 NCHW).

  peer_dataloader.py DIR --workers W [--batch 64] [--images N] [--float]

One thread per process (torch.set_num_threads(1) in the main process and in every worker), W
worker processes (0: in the main process), shuffle=True, persistent_workers=False. Consumes 2
warm-up batches, then at least N images (wrapping to a new epoch, with new workers, if the set
is smaller: "epochs" > 1 says so). Prints one JSON line:

  images_per_s              measured images / time after the 2 warm-up batches
  images_per_s_incl_start   all images delivered (warm-up included) / time from creating the
                            DataLoader iterator (which starts the workers) to the last batch
  peak_rss_mib_main         peak RSS of this process (ru_maxrss)
  peak_rss_mib_workers_max  largest peak RSS of one worker (VmHWM read from /proc just before the
                            workers are shut down; cross-checked with RUSAGE_CHILDREN after)
  peak_rss_mib_total        main + sum of the workers' peaks (of one epoch's workers). Workers are fork()ed, so pages
                            they share with the main process count once per process here;
                            pss_mib_total_end is the proportional (shared counted once) total
                            at the end (last epoch's workers, read just before shutdown)
"""
import argparse
import json
import os
import resource
import sys
import time

import PIL
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def proc_status(pid, key):
    """A field of /proc/PID/status in KiB (or a count), None if the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def proc_pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def worker_init(_worker_id):
    torch.set_num_threads(1)


class Workers:
    """Snapshots of the live DataLoader workers' /proc stats (peaks only grow, so the last
    snapshot before shutdown is the peak). Each epoch has its own workers; totals take the
    epoch whose workers' peaks add up to the most, since workers of two epochs never coexist."""

    def __init__(self):
        self.hwm_kib = {}   # pid -> VmHWM
        self.threads = {}   # pid -> thread count
        self.pss_kib = {}
        self.epoch_sums_kib = [0]
        self.last_pids = []

    def end_epoch(self, it):
        self.snapshot(it)
        pids = self.last_pids = [w.pid for w in getattr(it, "_workers", [])]
        self.epoch_sums_kib.append(sum(self.hwm_kib.get(pid, 0) for pid in pids))

    def snapshot(self, it):
        for w in getattr(it, "_workers", []):
            hwm = proc_status(w.pid, "VmHWM")
            if hwm is not None:
                self.hwm_kib[w.pid] = max(hwm, self.hwm_kib.get(w.pid, 0))
                self.threads[w.pid] = proc_status(w.pid, "Threads")
                self.pss_kib[w.pid] = proc_pss_kib(w.pid)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--images", type=int, default=2000, help="images measured after warm-up")
    p.add_argument("--float", action="store_true",
                   help="ToTensor + Normalize (float32) instead of PILToTensor (uint8)")
    p.add_argument("--warmup-batches", type=int, default=2)
    return p.parse_args()


def make_loader(a):
    """The ImageFolder and its DataLoader, as torchvision's recipe builds them."""
    tail = ([transforms.ToTensor(), transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
            if a.float else [transforms.PILToTensor()])
    tf = transforms.Compose([transforms.RandomResizedCrop(224),
                             transforms.RandomHorizontalFlip()] + tail)
    ds = datasets.ImageFolder(a.dir, transform=tf)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers,
                        persistent_workers=False, pin_memory=False,
                        worker_init_fn=worker_init if a.workers > 0 else None)
    return ds, loader


class Run:
    """What one measurement counted: images, epochs, the main process's threads and the times
    (start, end of the warm-up, end)."""
    delivered = measured = epochs = batches = main_threads = 0
    t_start = t_warm = t_end = None


def measure(a, loader, workers):
    """Reads the warm-up batches, then at least --images images, new epochs as needed."""
    run = Run()
    run.t_start = time.perf_counter()
    done = False
    while not done:
        it = iter(loader)
        run.epochs += 1
        for images, _labels in it:
            n = images.shape[0]
            run.delivered += n
            run.batches += 1
            if run.t_warm is None:
                if run.batches == a.warmup_batches:
                    run.t_warm = time.perf_counter()
                    workers.snapshot(it)
                continue
            run.measured += n
            if run.measured >= a.images:
                done = True
                break
        # Before the iterator shuts its workers down.
        workers.end_epoch(it)
        run.main_threads = max(run.main_threads, proc_status("self", "Threads") or 0)
        del it
    run.t_end = time.perf_counter()
    if run.t_warm is None:
        sys.exit("fewer batches than the warm-up; use a bigger set")
    return run


def result(a, ds, workers, run):
    """The JSON line's fields (the module's docstring says what each means)."""
    kib = 1024.0
    self_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
    children_max = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    worker_peaks = list(workers.hwm_kib.values())
    workers_max = max(worker_peaks + [children_max]) if a.workers > 0 else 0
    pss_workers = [workers.pss_kib.get(pid) or 0 for pid in workers.last_pids]
    pss_main = proc_pss_kib("self") or 0
    t_start, t_warm, t_end = run.t_start, run.t_warm, run.t_end
    return {
        "peer": "dataloader_pil",
        "workers": a.workers,
        "images": run.measured,
        "images_per_s": round(run.measured / (t_end - t_warm), 1),
        "images_per_s_incl_start": round(run.delivered / (t_end - t_start), 1),
        "peak_rss_mib_main": round(self_peak / kib, 1),
        "peak_rss_mib_workers_max": round(workers_max / kib, 1),
        "peak_rss_mib_total": round((self_peak + max(workers.epoch_sums_kib)) / kib, 1),
        "pss_mib_total_end": round((pss_main + sum(pss_workers)) / kib, 1),
        "batch": a.batch,
        "output": "float32_nchw" if a.float else "uint8_nchw",
        "seconds": round(t_end - t_warm, 3),
        "seconds_incl_start": round(t_end - t_start, 3),
        "images_incl_warmup": run.delivered,
        "epochs": run.epochs,
        "processes": 1 + a.workers,
        "torch_threads_per_process": 1,
        "threads_main": run.main_threads,
        "threads_per_worker": sorted(set(v for v in workers.threads.values() if v)),
        "dataset_images": len(ds),
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__,
                     "pillow": PIL.__version__},
        "host_cpus": os.cpu_count(),
    }


def main():
    a = parse_args()
    torch.set_num_threads(1)
    ds, loader = make_loader(a)
    workers = Workers()
    run = measure(a, loader, workers)
    print(json.dumps(result(a, ds, workers, run)))

if __name__ == "__main__":
    main()
