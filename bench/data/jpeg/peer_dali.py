#!/usr/bin/env python3
"""JPEG peer (b): NVIDIA DALI's CPU-only pipeline (no GPU, no driver needed) doing the same work
as peer_dataloader.py: read JPEGs from an ImageFolder-layout directory, fused decode +
RandomResizedCrop window (torchvision's scale (0.08, 1) and ratio (3/4, 4/3), 10 attempts),
resize to 224x224 (linear, antialiased), random horizontal flip, uint8 HWC output, or with
--float, normalised float32 CHW (ImageNet mean/std, like ToTensor + Normalize).

  peer_dali.py DIR --threads T [--batch 64] [--images N] [--float]

Runs in its own venv (DALI pins its own numpy/CUDA wheels):
  python3 -m venv /root/.cache/hpctrain/venv-dali
  /root/.cache/hpctrain/venv-dali/bin/pip install nvidia-dali-cuda120

One process; DALI's CPU operators run on T threads (num_threads), plus DALI's own executor and
prefetch threads (threads_process reports the total). The reader wraps around epochs by itself.
Consumes 2 warm-up batches, then at least N images. Prints one JSON line:

  images_per_s              measured images / time after the 2 warm-up batches
  images_per_s_incl_start   all images delivered / time from building the pipeline (which
                            indexes the directory and starts the threads) to the last batch
  peak_rss_mib_main         peak RSS of the process (ru_maxrss); _total is the same, and
  peak_rss_mib_workers_max  is 0 (no worker processes)
"""
import argparse
import json
import os
import resource
import time

import nvidia.dali as dali
from nvidia.dali import fn, pipeline_def, types

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def threads_now():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def build_pipeline(root, batch, threads, as_float, seed):
    # device_id=None: CPU-only mode (types.CPU_ONLY_DEVICE_ID); DALI then never touches CUDA.
    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=seed,
                  prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=root, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(
            jpegs, device="cpu", output_type=types.RGB,
            random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3], num_attempts=10)
        images = fn.resize(images, resize_x=224, resize_y=224)
        mirror = fn.random.coin_flip()
        if as_float:
            images = fn.crop_mirror_normalize(
                images, mirror=mirror, output_layout="CHW", dtype=types.FLOAT,
                mean=[255 * m for m in IMAGENET_MEAN], std=[255 * s for s in IMAGENET_STD])
        else:
            images = fn.crop_mirror_normalize(images, mirror=mirror, output_layout="HWC",
                                              dtype=types.UINT8)
        return images, labels

    return pipe()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--images", type=int, default=2000, help="images measured after warm-up")
    p.add_argument("--float", action="store_true",
                   help="normalised float32 CHW output instead of uint8 HWC")
    p.add_argument("--warmup-batches", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    t_start = time.perf_counter()
    pipe = build_pipeline(a.dir, a.batch, a.threads, a.float, a.seed)
    pipe.build()
    dataset_images = pipe.epoch_size("reader")
    delivered = measured = batches = 0
    t_warm = None
    shape = dtype = None
    while True:
        images, _labels = pipe.run()
        n = len(images)
        delivered += n
        batches += 1
        if batches == 1:
            arr = images.as_array()   # checks the batch is dense; cheap next to decoding
            shape, dtype = list(arr.shape), str(arr.dtype)
        if t_warm is None:
            if batches == a.warmup_batches:
                t_warm = time.perf_counter()
            continue
        measured += n
        if measured >= a.images:
            break
    t_end = time.perf_counter()
    threads = threads_now()
    del pipe

    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    out = {
        "peer": "dali_cpu",
        "threads": a.threads,
        "images": measured,
        "images_per_s": round(measured / (t_end - t_warm), 1),
        "images_per_s_incl_start": round(delivered / (t_end - t_start), 1),
        "peak_rss_mib_main": round(peak_mib, 1),
        "peak_rss_mib_workers_max": 0,
        "peak_rss_mib_total": round(peak_mib, 1),
        "batch": a.batch,
        "output": "float32_nchw" if a.float else "uint8_nhwc",
        "batch_shape": shape,
        "dtype": dtype,
        "seconds": round(t_end - t_warm, 3),
        "seconds_incl_start": round(t_end - t_start, 3),
        "images_incl_warmup": delivered,
        "processes": 1,
        "threads_process": threads,
        "dataset_images": dataset_images,
        "versions": {"dali": dali.__version__},
        "host_cpus": os.cpu_count(),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
