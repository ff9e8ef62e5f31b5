"""hpctrain's crop geometry against torchvision's own code (crop_geometry_tool prints our boxes).

- Center crop, exact: over a grid of image sizes (odd and even differences), output sizes and both
  rules (the raw path's and the JPEG path's), our box's offsets equal torchvision's center_crop's
  for a crop of our box's size (int(round((h - crop) / 2.0)), halves to even), read off a
  coordinate image cropped by F.center_crop; the crop is the whole shorter side when not
  downscaling. Where the shorter side is already Resize's target (256 for 224), our box is
  torchvision's Resize(256) + CenterCrop(224) exactly.
- Resize + CenterCrop elsewhere, bounded: torchvision crops on the resized pixel grid, which our
  whole-pixel box in the source cannot always follow; the first and last output pixels' sample
  positions (bilinear, align_corners=False) differ by at most 1 output pixel + 0.75 source pixels.
- Random resized crop, by distribution (our RNG is not torch's): with scale 0.08-0.5 on large
  images (every try fits, no fallback) the log aspect ratio is uniform on [log 3/4, log 4/3], the
  area fraction uniform on [0.08, 0.5] and the offsets uniform (one-sample Kolmogorov-Smirnov,
  D * sqrt(n) below 1.95, p = 0.001; a ratio drawn uniformly instead of log-uniformly gives about
  4.5); with torchvision's defaults on photo sizes, ours and torchvision's get_params agree in
  log ratio, area fraction and offsets (two-sample KS, p = 0.001); on extreme aspect ratios the
  fallback rate matches torchvision's (within 4.5 standard errors) and the fallback box is
  torchvision's exactly; every box lies in its image, tiny images included.
Fixed seeds throughout. Exit 1 when a check fails; prints the measured figures either way.
"""
import argparse
import math
import subprocess
import sys

import numpy as np
import torch
import torchvision.transforms.functional as F
from torchvision import transforms

KS_CRIT = 1.95  # Kolmogorov's asymptotic critical value of D * sqrt(n) at p = 0.001
N = 4000  # draws per random-resized-crop sample
# Resize + CenterCrop: torchvision truncates the resized side and rounds the offset on the resized
# grid (together up to 1 output pixel); we round the crop's size and offset to whole source pixels
# (together up to 0.75 source pixels).
MAX_SOURCE_SHIFT = 0.75
RATIO = (3.0 / 4.0, 4.0 / 3.0)


def run_tool(tool, commands):
    out = subprocess.run([tool], input="\n".join(commands) + "\n", capture_output=True, text=True,
                         check=True).stdout
    return np.array([[int(v) for v in line.split()] for line in out.splitlines()], dtype=np.int64)


def coords(h, w):
    """A 2 x h x w image holding each pixel's (y, x): a transform's output says where it read."""
    y = torch.arange(h, dtype=torch.float32).view(h, 1).expand(h, w)
    x = torch.arange(w, dtype=torch.float32).view(1, w).expand(h, w)
    return torch.stack([y, x])


def ks_uniform(x, lo, hi):
    x = np.sort((np.asarray(x, dtype=np.float64) - lo) / (hi - lo))
    n = len(x)
    i = np.arange(1, n + 1)
    return max(np.max(i / n - x), np.max(x - (i - 1) / n)) * math.sqrt(n)


def ks_two(a, b):
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    d = np.max(np.abs(np.searchsorted(a, grid, side="right") / len(a) -
                      np.searchsorted(b, grid, side="right") / len(b)))
    return d / math.sqrt((len(a) + len(b)) / (len(a) * len(b)))


def tv_boxes(h, w, n, scale, seed):
    torch.manual_seed(seed)
    img = torch.empty(1, 1, 1).expand(1, h, w)  # get_params reads the shape only
    return np.array([transforms.RandomResizedCrop.get_params(img, scale, RATIO) for _ in range(n)],
                    dtype=np.int64)


def in_image(boxes, h, w):
    t, l, bh, bw = boxes.T
    return bool(np.all((t >= 0) & (l >= 0) & (bh >= 1) & (bw >= 1) & (t + bh <= h) & (l + bw <= w)))


def check_center(tool, failures):
    cases = []
    for h in range(1, 41):
        for w in range(1, 41):
            for out in (8, 24):
                cases += [(h, w, out, 0), (h, w, out, 1)]
    for h in (223, 224, 255, 256, 257, 300, 333, 375, 500):
        for w in (224, 225, 256, 301, 302, 303, 375, 500, 640):
            cases += [(h, w, 224, 0), (h, w, 224, 1)]
    ours = run_tool(tool, [f"center {h} {w} {out} {fa}" for h, w, out, fa in cases])
    wrong = []
    floor_differs = 0
    for (h, w, out, fa), (top, left, ch, cw) in zip(cases, ours):
        side = min(h, w)
        crop_ok = ch == cw and (ch == side if not fa and side <= out else 1 <= ch <= side)
        c = F.center_crop(coords(h, w), [int(ch), int(cw)])
        want = (int(c[0, 0, 0]), int(c[1, 0, 0]))
        floor_differs += want != ((h - ch) // 2, (w - cw) // 2)
        if not crop_ok or (top, left) != want:
            wrong.append(f"{h}x{w} out {out} rule {fa}: ours top {top} left {left} crop {ch}x{cw}, "
                         f"torchvision's center_crop top {want[0]} left {want[1]}")
    print(f"center crop: {len(cases)} cases, {len(wrong)} differ from torchvision's offsets "
          f"({floor_differs} cases where floor division would differ)")
    failures += wrong[:10]

    # The JPEG path's rule where Resize(256) changes nothing: torchvision's pipeline exactly.
    tv = transforms.Compose([transforms.Resize(256, antialias=False), transforms.CenterCrop(224)])
    same = [(256, w) for w in (256, 257, 301, 302, 303, 384, 455)] + [(h, 256) for h in (259, 333)]
    ours = run_tool(tool, [f"center {h} {w} 224 1" for h, w in same])
    for (h, w), (top, left, ch, cw) in zip(same, ours):
        c = tv(coords(h, w))
        want = (int(c[0, 0, 0]), int(c[1, 0, 0]), 224, 224)
        if (top, left, ch, cw) != want:
            failures.append(f"{h}x{w}: ours {top, left, ch, cw}, torchvision Resize(256)+"
                            f"CenterCrop(224) reads {want}")

    # Elsewhere Resize(256) + CenterCrop(224) crops on the resized grid: where the first and last
    # output pixels sample, ours against torchvision's, in output pixels.
    rng = np.random.default_rng(33)
    sizes = [(500, 375), (375, 500), (333, 500), (480, 640), (768, 1024), (200, 300), (231, 400),
             (533, 800), (900, 1200), (100, 150), (1000, 999)]
    sizes += [tuple(int(v) for v in rng.integers(120, 1300, size=2)) for _ in range(25)]
    ours = run_tool(tool, [f"center {h} {w} 224 1" for h, w in sizes])
    worst = 0.0  # the largest shift as a fraction of its allowance
    worst_out = 0.0  # the largest shift in output pixels
    for (h, w), (top, left, ch, cw) in zip(sizes, ours):
        c = tv(coords(h, w)).double()
        step = ch / 224.0  # source pixels per output pixel
        for axis, start in ((0, top), (1, left)):
            for o, got in ((0, c[axis, 0, 0]), (223, c[axis, -1, -1])):
                shift = abs(start + (o + 0.5) * step - 0.5 - float(got))
                worst = max(worst, shift / (step + MAX_SOURCE_SHIFT))
                worst_out = max(worst_out, shift / step)
    print(f"resize + center crop on {len(sizes)} sizes: sample positions differ by at most "
          f"{worst:.3f} of (1 output pixel + {MAX_SOURCE_SHIFT} source pixels); at most "
          f"{worst_out:.2f} output pixels")
    if worst > 1.0:
        failures.append(f"resize + center crop: sample positions {worst:.3f} of the allowance off")


def box_stats(boxes, h, w):
    t, l, bh, bw = boxes.T.astype(np.float64)
    return np.log(bw / bh), bh * bw / (h * w), t, l, bh, bw


def check_rrc(tool, failures):
    # No fallback: every try fits, so the draws are the distributions themselves.
    for h, w in ((4000, 4000), (3000, 4000), (4000, 3000)):
        boxes = run_tool(tool, [f"rrc {h} {w} {N} 7 0.08 0.5"])
        logr, frac, t, l, bh, bw = box_stats(boxes, h, w)
        stats = {
            "log ratio": ks_uniform(logr, math.log(RATIO[0]), math.log(RATIO[1])),
            "area fraction": ks_uniform(frac, 0.08, 0.5),
            "top": ks_uniform((t + 0.5) / (h - bh + 1), 0, 1),
            "left": ks_uniform((l + 0.5) / (w - bw + 1), 0, 1),
        }
        print(f"rrc {h}x{w} scale 0.08-0.5, {N} draws, KS D*sqrt(n) against uniform: " +
              ", ".join(f"{k} {v:.2f}" for k, v in stats.items()) + f" (fail at {KS_CRIT})")
        failures += [f"rrc {h}x{w}: {k} not uniform (KS {v:.2f})" for k, v in stats.items()
                     if v >= KS_CRIT]
        if not in_image(boxes, h, w):
            failures.append(f"rrc {h}x{w}: a box leaves the image")

    # torchvision's defaults on photo sizes: the same distributions as torchvision's get_params.
    for seed, (h, w) in enumerate(((500, 375), (375, 500), (256, 256), (333, 500), (64, 48))):
        ours = box_stats(run_tool(tool, [f"rrc {h} {w} {N} {seed} 0.08 1.0"]), h, w)
        theirs = box_stats(tv_boxes(h, w, N, (0.08, 1.0), seed), h, w)
        names = ("log ratio", "area fraction", "top", "left", "height", "width")
        stats = {k: ks_two(a, b) for k, a, b in zip(names, ours, theirs)}
        print(f"rrc {h}x{w} default scale, ours vs torchvision, two-sample KS: " +
              ", ".join(f"{k} {v:.2f}" for k, v in stats.items()))
        failures += [f"rrc {h}x{w}: {k} differs from torchvision's (KS {v:.2f})"
                     for k, v in stats.items() if v >= KS_CRIT]

    # Extreme aspect ratios: the fallback box (every try forced to fail) and how often it comes.
    for seed, (h, w) in enumerate(((100, 1000), (1000, 100), (60, 400), (300, 1000), (1000, 500),
                                   (10, 10000))):
        fb_ours = tuple(int(v) for v in run_tool(tool, [f"rrc {h} {w} 1 0 1e9 1e9"])[0])
        fb_tv = tuple(int(v) for v in tv_boxes(h, w, 1, (1e9, 1e9), 0)[0])
        if fb_ours != fb_tv:
            failures.append(f"rrc {h}x{w}: fallback box {fb_ours}, torchvision's {fb_tv}")
        ours = run_tool(tool, [f"rrc {h} {w} {N} {seed} 0.08 1.0"])
        theirs = tv_boxes(h, w, N, (0.08, 1.0), seed)
        p_ours = np.mean(np.all(ours == fb_tv, axis=1))
        p_tv = np.mean(np.all(theirs == fb_tv, axis=1))
        p = (p_ours + p_tv) / 2
        se = math.sqrt(max(p * (1 - p), 1.0 / N) * 2.0 / N)
        print(f"rrc {h}x{w}: fallback {fb_ours} (torchvision {fb_tv}), rate ours {p_ours:.4f}, "
              f"torchvision {p_tv:.4f} ({abs(p_ours - p_tv) / se:.1f} standard errors)")
        if abs(p_ours - p_tv) > 4.5 * se:
            failures.append(f"rrc {h}x{w}: fallback rate {p_ours:.4f}, torchvision {p_tv:.4f}")
        if not in_image(ours, h, w):
            failures.append(f"rrc {h}x{w}: a box leaves the image")

    tiny = [(h, w) for h in (1, 2, 3, 5, 8) for w in (1, 2, 3, 7, 40)]
    bad = [f"{h}x{w}" for h, w in tiny
           if not in_image(run_tool(tool, [f"rrc {h} {w} 200 3 0.08 1.0"]), h, w)]
    if bad:
        failures.append("rrc: boxes leave tiny images " + ", ".join(bad))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    args = p.parse_args()
    failures = []
    check_center(args.tool, failures)
    check_rrc(args.tool, failures)
    for f in failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
