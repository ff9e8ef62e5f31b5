"""hpctrain's JPEG path against PIL and torchvision on the same JPEG files.

JPEGs at ImageNet-like sizes and aspect ratios are made here with PIL (quality 90, 4:2:0), from
smooth random images with texture. Two checks:
- the full decode (jpeg_tool full) equals PIL's decode of the same file: both are libjpeg-turbo
  with the default ISLOW IDCT and fancy upsampling; allowed: max |diff| <= 1 (libjpeg-turbo
  versions may round chroma upsampling differently), and said how many differ;
- the evaluation crop (jpeg_tool eval 224) against torchvision's Resize(256) + CenterCrop(224)
  (bilinear, antialias) on PIL's decode: hpctrain crops 224/256 of the shorter side and resizes
  that (after DCT scaling by the smallest n/8 that keeps the crop at least the output) with
  bilinear taps, without torchvision's antialiasing, so the pixels differ by resampling filters,
  not geometry. Tolerance: per image, mean |diff| <= 5.0 (of 255) and the 99th percentile of
  |diff| <= 20 (measured: mean 2.1-4.8, p99 7-16 on these files).
Exit 1 when a check fails; prints the measured figures either way.
"""
import argparse
import io
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image
import torch
from torchvision import transforms

SIZES = [(500, 375), (375, 500), (500, 333), (640, 480), (1024, 768), (256, 256), (300, 200),
         (231, 400), (800, 533), (1200, 900)]


def photo_like(w, h, rng):
    """Smooth colour fields plus texture: what a photo's 8x8 blocks hold."""
    small = rng.integers(0, 256, size=(max(2, h // 32), max(2, w // 32), 3), dtype=np.uint8)
    base = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float64)
    noise = rng.normal(0, 12, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    args = p.parse_args()
    rng = np.random.default_rng(19)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (w, h) in enumerate(SIZES):
            path = Path(tmp) / f"img{i}.jpg"
            Image.fromarray(photo_like(w, h, rng)).save(path, quality=90, subsampling=2)
            files.append(path)
        full = subprocess.run([args.tool, "full", *map(str, files)], capture_output=True, check=True).stdout
        evals = subprocess.run([args.tool, "eval", "224", *map(str, files)], capture_output=True,
                               check=True).stdout
        tv = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
        offset = 0
        for i, path in enumerate(files):
            pil = Image.open(path).convert("RGB")
            ref = np.asarray(pil)
            n = ref.size
            ours = np.frombuffer(full[offset:offset + n], dtype=np.uint8).reshape(ref.shape)
            offset += n
            d = np.abs(ours.astype(int) - ref.astype(int))
            print(f"{path.name} {pil.size[0]}x{pil.size[1]} full decode vs PIL: max |diff| {d.max()}, "
                  f"{int((d > 0).sum())} of {d.size} values differ")
            if d.max() > 1:
                failures.append(f"{path.name}: full decode differs from PIL's by {d.max()}")
            want = np.asarray(tv(pil))
            got = np.frombuffer(evals[i * 224 * 224 * 3:(i + 1) * 224 * 224 * 3],
                                dtype=np.uint8).reshape(224, 224, 3)
            e = np.abs(got.astype(int) - want.astype(int))
            mean, p99 = e.mean(), np.percentile(e, 99)
            print(f"{path.name} eval 224 vs torchvision Resize(256)+CenterCrop(224): mean |diff| "
                  f"{mean:.2f}, p99 {p99:.0f}, max {e.max()}")
            if mean > 5.0 or p99 > 20:
                failures.append(f"{path.name}: eval crop mean |diff| {mean:.2f}, p99 {p99:.0f}")
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
