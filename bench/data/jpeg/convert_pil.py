#!/usr/bin/env python3
"""Converter peer: the Python/PIL counterpart of `hpctrain-data folder --jpeg`, single process.
Walks an ImageFolder (classes and files sorted), and for each image:

  - a 3-component JPEG whose longer side is within --max-side: its bytes are kept as stored,
    after PIL decodes it whole at 1/8 scale (draft mode: every coefficient is entropy-decoded,
    as the C++ converter's check does; --full-decode decodes at full size instead);
  - anything else (larger, grayscale/CMYK JPEG, PNG, ...): decoded to RGB, resized so the longer
    side is at most --max-side (aspect kept, bicubic), re-encoded at --quality (4:2:0);
  - a file that does not decode is skipped and counted.

Writes OUT.h5 in the layout of dataset format version 2 as the C++ writer makes it (/encoded:
uint8, contiguous, the samples concatenated; /offsets: uint64 [N+1]; /shapes: int32 [N, 2]
(height, width); /labels: int64; root attributes format, format_version=2, num_classes,
class_names, image_shape (largest H, W, 3), mean/std (from the decoded pixels, 0..1), encoding,
writer). Prints one JSON line:
{"peer":"convert_pil","images":..,"images_per_s":..,"bytes_per_image":..} and details.

  convert_pil.py SRC_DIR OUT.h5 --max-side M --quality Q [--full-decode]
"""
import argparse
import io
import json
import os
import time

import h5py
import numpy as np
import PIL
from PIL import Image

EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tga", ".ppm", ".pgm"}
STATS_STRIDE = 16   # every 16th pixel of a re-encoded image, as the C++ converter
FULL_DECODE_STATS_STRIDE = 64   # about the pixel count of a 1/8-scale decode


class Stats:
    def __init__(self):
        self.sum = np.zeros(3, np.float64)
        self.sum_sq = np.zeros(3, np.float64)
        self.pixels = 0

    def add(self, rgb, stride=1):
        # float64 holds these integer sums exactly (< 2^53) and is ~2x faster than uint64.
        px = rgb.reshape(-1, 3)[::stride].astype(np.float64)
        self.sum += px.sum(0)
        self.sum_sq += np.einsum("ij,ij->j", px, px)
        self.pixels += len(px)

    def mean_std(self):
        if self.pixels == 0:
            return [0.5] * 3, [1.0] * 3
        mean = self.sum / self.pixels
        sd = np.sqrt(np.maximum(0.0, self.sum_sq / self.pixels - mean * mean)) / 255.0
        return list(mean / 255.0), [float(s) if s > 0 else 1.0 for s in sd]


def list_inputs(root):
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    inputs = []
    for label, c in enumerate(classes):
        d = os.path.join(root, c)
        names = sorted(e.name for e in os.scandir(d)
                       if e.is_file() and os.path.splitext(e.name)[1].lower() in EXTENSIONS)
        inputs += [(os.path.join(d, n), label) for n in names]
    return classes, inputs


def reencode(im, max_side, quality, stats):
    rgb = im.convert("RGB")
    w, h = rgb.size
    if max_side and max(w, h) > max_side:
        s = max_side / max(w, h)
        w, h = max(1, round(w * s)), max(1, round(h * s))
        rgb = rgb.resize((w, h), Image.BICUBIC)
    stats.add(np.asarray(rgb), STATS_STRIDE)
    out = io.BytesIO()
    rgb.save(out, "JPEG", quality=quality, subsampling=2)
    return out.getvalue(), h, w


def convert_one(path, max_side, quality, full_decode, stats):
    """(bytes, height, width, kept as stored)."""
    with open(path, "rb") as f:
        data = f.read()
    im = Image.open(io.BytesIO(data))
    w, h = im.size
    if im.format == "JPEG" and im.mode == "RGB" and (not max_side or max(w, h) <= max_side):
        if not full_decode:
            # Draft picks libjpeg's DCT scaling, the largest power of 2 (at most 8) that keeps
            # the size >= the request: floor(side / 8) gives 1/8.
            im.draft("RGB", (max(1, w // 8), max(1, h // 8)))
        im.load()
        stats.add(np.asarray(im), FULL_DECODE_STATS_STRIDE if full_decode else 1)
        return data, h, w, True
    im.load()
    b, h, w = reencode(im, max_side, quality, stats)
    return b, h, w, False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("src_dir")
    p.add_argument("out")
    p.add_argument("--max-side", type=int, default=0, help="0: no limit")
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--full-decode", action="store_true",
                   help="check kept JPEGs with a full-size decode instead of 1/8 scale")
    a = p.parse_args()

    t0 = time.perf_counter()
    classes, inputs = list_inputs(a.src_dir)
    chunks, offsets, shapes, labels = [], [0], [], []
    stats = Stats()
    kept = reencoded = 0
    skipped = []
    for path, label in inputs:
        try:
            b, h, w, as_is = convert_one(path, a.max_side, a.quality, a.full_decode, stats)
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            skipped.append((path, str(e)))
            continue
        kept += as_is
        reencoded += not as_is
        chunks.append(b)
        offsets.append(offsets[-1] + len(b))
        shapes.append((h, w))
        labels.append(label)
    if not labels:
        raise SystemExit(f"{a.src_dir}: no image decoded")
    t_convert = time.perf_counter()

    encoded = np.frombuffer(b"".join(chunks), np.uint8)
    shapes = np.array(shapes, np.int32)
    n = len(labels)
    mean, std = stats.mean_std()
    tmp = a.out + ".partial"
    with h5py.File(tmp, "w", libver=("v110", "v110")) as f:
        f.create_dataset("encoded", data=encoded, track_times=False)   # contiguous, unfiltered
        for name, arr in (("offsets", np.array(offsets, np.uint64)), ("shapes", shapes),
                          ("labels", np.array(labels, np.int64))):
            f.create_dataset(name, data=arr, chunks=(min(len(arr), 65536),) + arr.shape[1:],
                             fletcher32=True, track_times=False)
        f.attrs["format"] = "hpctrain-images"
        f.attrs["format_version"] = np.int64(2)
        f.attrs["num_classes"] = np.int64(len(classes))
        f.attrs["class_names"] = np.array(classes, dtype=h5py.string_dtype())
        f.attrs["image_shape"] = np.array([shapes[:, 0].max(), shapes[:, 1].max(), 3], np.int64)
        f.attrs["mean"] = np.array(mean, np.float64)
        f.attrs["std"] = np.array(std, np.float64)
        f.attrs["encoding"] = "jpeg"
        f.attrs["writer"] = "bench/data/jpeg/convert_pil.py"
    os.replace(tmp, a.out)
    t_end = time.perf_counter()

    print(json.dumps({
        "peer": "convert_pil",
        "images": n,
        "images_per_s": round(n / (t_end - t0), 1),
        "bytes_per_image": round(len(encoded) / n, 1),
        "seconds": round(t_end - t0, 3),
        "seconds_write": round(t_end - t_convert, 3),
        "inputs": len(inputs),
        "stored_as_is": kept,
        "reencoded": reencoded,
        "skipped": len(skipped),
        "max_side": a.max_side,
        "quality": a.quality,
        "check": "full" if a.full_decode else "1/8 scale",
        "output_bytes": os.path.getsize(a.out),
        "versions": {"pillow": PIL.__version__, "h5py": h5py.__version__},
    }))
    for path, why in skipped[:10]:
        print(f"skipped {path}: {why}", flush=True)


if __name__ == "__main__":
    main()
