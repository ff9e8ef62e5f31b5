#!/usr/bin/env python3
"""Python peer for bench/data: a PyTorch DataLoader over h5py doing the same work as the C++
loader (read shuffled samples, optional augmentation, normalise, batch), with the same number
of worker processes. Prints one key=value line like bench_loader.

  peer.py FILE --workers 2 --batch 256 --augment none|crop_flip|random_resized_crop
          [--image-size S] [--limit N]
"""
import argparse
import math
import time

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class H5Images(Dataset):
    def __init__(self, path, augment, image_size, pad, limit):
        self.path, self.augment, self.pad = path, augment, pad
        with h5py.File(path, "r") as f:
            self.n = min(len(f["labels"]), limit) if limit else len(f["labels"])
            h, w, c = f["images"].shape[1:]
            self.mean = torch.tensor(f.attrs["mean"], dtype=torch.float32).view(c, 1, 1)
            self.std = torch.tensor(f.attrs["std"], dtype=torch.float32).view(c, 1, 1)
        self.h, self.w = h, w
        self.size = image_size or h
        self.f = None

    def __len__(self):
        return self.n

    def _open(self):
        # h5py handles must not cross fork(): open once per worker.
        self.f = h5py.File(self.path, "r")
        self.images, self.labels = self.f["images"], self.f["labels"]

    def _normalise(self, chw_uint8):
        return (chw_uint8.float() / 255.0 - self.mean) / self.std

    def __getitem__(self, i):
        if self.f is None:
            self._open()
        img = self.images[i]  # H, W, C uint8
        label = int(self.labels[i])
        if self.augment == "none":
            return torch.from_numpy(img), label  # raw uint8 NHWC, like bench_loader --output uint8
        if self.augment == "crop_flip":
            p = self.pad
            padded = np.pad(img, ((p, p), (p, p), (0, 0)))
            y = np.random.randint(0, 2 * p + self.h - self.size + 1)
            x = np.random.randint(0, 2 * p + self.w - self.size + 1)
            crop = padded[y:y + self.size, x:x + self.size]
            if np.random.rand() < 0.5:
                crop = crop[:, ::-1]
            return self._normalise(torch.from_numpy(np.ascontiguousarray(crop)).permute(2, 0, 1)), label
        # random_resized_crop, torchvision's get_params + bilinear resize + flip
        area = self.h * self.w
        top, left, ch, cw = 0, 0, self.h, self.w
        for _ in range(10):
            target = area * np.random.uniform(0.08, 1.0)
            ratio = math.exp(np.random.uniform(math.log(3 / 4), math.log(4 / 3)))
            cw_ = int(round(math.sqrt(target * ratio)))
            ch_ = int(round(math.sqrt(target / ratio)))
            if 0 < cw_ <= self.w and 0 < ch_ <= self.h:
                top = np.random.randint(0, self.h - ch_ + 1)
                left = np.random.randint(0, self.w - cw_ + 1)
                ch, cw = ch_, cw_
                break
        crop = torch.from_numpy(img[top:top + ch, left:left + cw]).permute(2, 0, 1)
        out = F.interpolate(crop.unsqueeze(0).float(), size=(self.size, self.size), mode="bilinear",
                            align_corners=False).squeeze(0)
        if np.random.rand() < 0.5:
            out = out.flip(-1)
        return (out / 255.0 - self.mean) / self.std, label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--augment", default="none")
    ap.add_argument("--image-size", type=int, default=0)
    ap.add_argument("--pad", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(7)
    ds = H5Images(a.file, a.augment, a.image_size, a.pad, a.limit)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers)
    t0 = time.perf_counter()
    images = 0
    for x, y in loader:
        images += x.shape[0]
    dt = time.perf_counter() - t0
    print(f"mode=peer images={images} seconds={dt:.4f} images_per_s={images / dt:.1f} "
          f"workers={a.workers} augment={a.augment}")


if __name__ == "__main__":
    main()
