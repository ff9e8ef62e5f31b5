#!/usr/bin/env python3
"""Deterministic ImageNet-like JPEG set for the JPEG benchmarks, in torchvision ImageFolder
layout: OUT_DIR/<class>/<name>.JPEG, 10 classes (the Fashion-MNIST labels).

  make_jpegs.py OUT_DIR --count N --seed S [--procs 2] [--overwrite]

Each image is a mosaic of Fashion-MNIST items (Debian package dataset-fashion-mnist), upscaled,
colourised and textured, over a smooth gradient + band-limited noise background, plus mild
Gaussian noise, so that it compresses more like a photo (~3.7 bits/pixel at q90; flat synthetic
images would be far smaller and decode faster, flattering every decoder). The class is the label
of the main (largest) item. Sizes follow ImageNet's shape: most images have a 500-pixel longer side, shorter side
~280-500 (aspect 1:1..16:9, mostly 4:3), a quarter portrait, a few small ones. RGB, PIL
quality 90, 4:2:0 (PIL's default at that quality).

Image i depends only on (S, i), so the set is the same whatever the number of processes.
"""
import argparse
import gzip
import multiprocessing as mp
import os
import shutil
import sys
import time

import numpy as np
from PIL import Image

FASHION_DIR = "/usr/share/datasets/fashion-mnist"
# Fashion-MNIST label names; ImageFolder sorts folder names, so a 2-digit prefix keeps the
# folder index equal to the Fashion-MNIST label.
CLASSES = ["00_tshirt", "01_trouser", "02_pullover", "03_dress", "04_coat",
           "05_sandal", "06_shirt", "07_sneaker", "08_bag", "09_ankle_boot"]
QUALITY = 90
# Tuned so that a 500x375 image is ~85-90 KB at quality 90 (ImageNet's mean is ~110 KB over
# slightly larger images). Value-noise octaves (cells on the shorter side, amplitude, channels:
# 3 = colour blotches, 1 = luminance texture), sensor-noise sigma, and how many items of each
# kind (ranges): clutter (tiny), distractors (small); the grain amplitude of item textures.
OCTAVES = ((4, 40.0, 3), (16, 22.0, 3), (48, 16.0, 3),
           (80, 50.0, 1), (160, 50.0, 1), (320, 30.0, 1))
NOISE_SIGMA = 6.0
CLUTTER = (80, 300)
DISTRACTORS = (4, 16)
ITEM_GRAIN = (20, 40)

_items = None   # (60000, 28, 28) uint8, loaded once per process
_labels = None


def load_fashion():
    with gzip.open(os.path.join(FASHION_DIR, "train-images-idx3-ubyte.gz"), "rb") as f:
        raw = f.read()
    n, h, w = (int.from_bytes(raw[i:i + 4], "big") for i in (4, 8, 12))
    items = np.frombuffer(raw, np.uint8, offset=16).reshape(n, h, w)
    with gzip.open(os.path.join(FASHION_DIR, "train-labels-idx1-ubyte.gz"), "rb") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    assert len(labels) == n
    return items, labels


def _init_worker():
    global _items, _labels
    _items, _labels = load_fashion()


def image_size(rng):
    """(width, height), ImageNet-like."""
    u = rng.random()
    if u < 0.04:                      # a few small ones
        long_side = int(rng.integers(100, 250))
    elif u < 0.14:                    # some in between
        long_side = int(rng.integers(250, 500))
    else:
        long_side = 500
    aspect = rng.choice([4 / 3, 3 / 2, 16 / 9, 1.0, rng.uniform(1.0, 16 / 9)],
                        p=[0.55, 0.12, 0.08, 0.05, 0.20])
    short_side = max(1, int(round(long_side / aspect)))
    if rng.random() < 0.25:           # portrait
        return short_side, long_side
    return long_side, short_side


def smooth_noise(rng, h, w, cells, channels):
    """Band-limited noise in [-1, 1]: a random grid of `cells` cells on the shorter side,
    upsampled bicubically (one octave of value noise)."""
    s = min(h, w)
    gh, gw = max(2, round(cells * h / s)), max(2, round(cells * w / s))
    grid = rng.uniform(-1, 1, (channels, gh, gw)).astype(np.float32)
    out = np.empty((h, w, channels), np.float32)
    for c in range(channels):
        out[:, :, c] = np.asarray(Image.fromarray(grid[c], mode="F").resize((w, h), Image.BICUBIC))
    return out


def background(rng, h, w):
    corners = rng.uniform(30, 225, (2, 2, 3)).astype(np.float32)
    ys = np.linspace(0, 1, h, dtype=np.float32)[:, None, None]
    xs = np.linspace(0, 1, w, dtype=np.float32)[None, :, None]
    img = (corners[0, 0] * (1 - ys) * (1 - xs) + corners[0, 1] * (1 - ys) * xs
           + corners[1, 0] * ys * (1 - xs) + corners[1, 1] * ys * xs)
    # Octaves of value noise, large blotches to fine grain. The fine ones are luminance texture
    # (like foliage, fur, fabric) whose strength varies over the image, with smooth regions
    # (like sky) in between, as in photos.
    mask = np.clip(0.7 + 1.2 * smooth_noise(rng, h, w, 3, 1), 0.1, 1.4)
    for cells, amp, channels in OCTAVES:
        octave = amp * rng.uniform(0.6, 1.0) * smooth_noise(rng, h, w, cells, channels)
        img += octave * mask if channels == 1 else octave
    return img


def paste_item(rng, img, fields, item, size, cy, cx):
    """Alpha-blend a Fashion-MNIST item (white on black), upscaled to `size`, centred at
    (cy, cx), with a random colour and a texture cut from the image's texture fields (one
    noise field per image instead of one per item: ~200 items per image)."""
    h, w, _ = img.shape
    y0, x0 = cy - size // 2, cx - size // 2
    y1, x1 = max(0, y0), max(0, x0)
    y2, x2 = min(h, y0 + size), min(w, x0 + size)
    if y2 <= y1 or x2 <= x1:
        return
    glyph = np.asarray(Image.fromarray(item).resize((size, size), Image.BICUBIC),
                       np.float32)[y1 - y0:y2 - y0, x1 - x0:x2 - x0, None] / 255.0
    alpha = np.minimum(glyph * 1.6, 1.0)
    base = rng.uniform(0, 255, 3).astype(np.float32)
    shade = rng.uniform(0, 255, 3).astype(np.float32) * 0.6
    blotch, grain = fields
    texture = (blotch[y1:y2, x1:x2] * rng.uniform(10, 30)
               + grain[y1:y2, x1:x2] * (rng.choice([-1, 1]) * rng.uniform(*ITEM_GRAIN)))
    colour = base * glyph + shade * (1 - glyph) + texture
    img[y1:y2, x1:x2] += (colour - img[y1:y2, x1:x2]) * alpha


def make_image(seed, i):
    """Returns (class index, W, H, PIL image) of image i."""
    rng = np.random.default_rng([seed, i])
    w, h = image_size(rng)
    img = background(rng, h, w)
    s = min(h, w)
    # Item textures: colour blotches of ~6 pixels and luminance grain of ~3 pixels.
    fields = (smooth_noise(rng, h, w, max(2, s // 6), 3), smooth_noise(rng, h, w, max(2, s // 3), 1))
    n_items = len(_items)

    def paste(k, size, cy, cx):
        if size >= 4:
            paste_item(rng, img, fields, _items[k], size, cy, cx)

    # Clutter (many tiny items: edge-rich texture like foliage or a crowd), then distractors
    # (smaller, anywhere), then the main item on top, near the centre.
    for lo, hi, count in ((0.03, 0.1, CLUTTER), (0.12, 0.4, DISTRACTORS)):
        for _ in range(int(rng.integers(*count))):
            paste(int(rng.integers(n_items)), int(s * rng.uniform(lo, hi)),
                  int(rng.integers(0, h)), int(rng.integers(0, w)))
    main = int(rng.integers(n_items))
    paste(main, max(8, int(s * rng.uniform(0.55, 0.9))),
          int(h / 2 + rng.uniform(-0.2, 0.2) * h), int(w / 2 + rng.uniform(-0.2, 0.2) * w))
    img += rng.normal(0, NOISE_SIGMA, img.shape).astype(np.float32)   # sensor-like noise
    pil = Image.fromarray(np.clip(img + 0.5, 0, 255).astype(np.uint8), "RGB")
    return int(_labels[main]), w, h, pil


def _work(args):
    out_dir, seed, i = args
    label, w, h, pil = make_image(seed, i)
    path = os.path.join(out_dir, CLASSES[label], f"img_{i:06d}.JPEG")
    tmp = path + ".tmp"
    pil.save(tmp, "JPEG", quality=QUALITY, subsampling=2)   # 2 = 4:2:0, PIL's default at q90
    os.replace(tmp, path)
    return label, w, h, os.path.getsize(path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--overwrite", action="store_true",
                   help="remove the class folders of an existing set first")
    a = p.parse_args()
    if os.path.isdir(a.out_dir) and os.listdir(a.out_dir):
        if not a.overwrite:
            sys.exit(f"{a.out_dir} is not empty; pass --overwrite to replace its class folders")
        for c in CLASSES:
            shutil.rmtree(os.path.join(a.out_dir, c), ignore_errors=True)
    for c in CLASSES:
        os.makedirs(os.path.join(a.out_dir, c), exist_ok=True)

    t0 = time.perf_counter()
    jobs = [(a.out_dir, a.seed, i) for i in range(a.count)]
    if a.procs > 1:
        with mp.get_context("fork").Pool(a.procs, initializer=_init_worker) as pool:
            results = list(pool.imap_unordered(_work, jobs, chunksize=16))
    else:
        _init_worker()
        results = [_work(j) for j in jobs]
    dt = time.perf_counter() - t0

    r = np.array(results, dtype=np.int64)  # label, w, h, bytes
    labels, ws, hs, nbytes = r[:, 0], r[:, 1], r[:, 2], r[:, 3]
    big = np.maximum(ws, hs) == 500
    near = (np.abs(ws * hs - 500 * 375) <= 0.1 * 500 * 375)
    print(f"count={len(r)}  mean_bytes={nbytes.mean():.0f}  mean_size={ws.mean():.0f}x{hs.mean():.0f}"
          f"  total_mb={nbytes.sum() / 1e6:.1f}  seconds={dt:.1f}")
    print(f"  longer side 500: {big.sum()} images, mean {nbytes[big].mean():.0f} bytes;"
          f" ~500x375 (+-10% pixels): {near.sum()} images, mean {nbytes[near].mean():.0f} bytes;"
          f" bits/pixel {8 * nbytes.sum() / (ws * hs).sum():.2f}")
    print("  per class: " + " ".join(str(int((labels == c).sum())) for c in range(len(CLASSES))))


if __name__ == "__main__":
    main()
