"""hpctrain-data folder --jpeg against the files it was given, checked with PIL and h5py.

The inputs are made here with PIL: 60 photo-like JPEGs (smooth colour fields plus texture, mostly
in brightness) at
ImageNet-like sizes (200-600 px sides; quality 75-95, 4:2:0 and 4:4:4, some progressive) in 4
class folders created out of sorted order, plus the cases a real tree holds: a text file named
x.jpg, a JPEG cut short, a grayscale JPEG, an RGB PNG, an Adobe CMYK JPEG and a JPEG larger than
--max-side 600 (a .txt file beside them is not an input). Checks, each naming what broke:
1. round trip: every 3-component JPEG within --max-side is stored byte for byte; labels are the
   index of the sorted class folder; /shapes is PIL's size of the stored image; the grey, CMYK,
   PNG and large inputs come back as 3-channel JPEGs of the source's size (the large one: longer
   side 600, aspect kept within 1 px), encoded at quality 90 (libjpeg's quantization tables for
   90) and close to the reference pixels (PIL's decode of the source; for the large one PIL's
   bicubic resize of that): mean |diff| at most 0.5 (of 255) above what PIL's own quality-90
   4:2:0 encode loses on the same reference. The texture makes that loss large; measured, ours
   against PIL's: PNG 3.79 / 3.79, CMYK 3.52 / 3.49, large 2.91 / 2.81 (stb's resampling filter
   is not PIL's bicubic), grey 0.02 / 0.02. The text file and the truncated JPEG are listed as
   skipped, counted, and in no shard; the summary's counts agree with the files.
2. shards: --shards 3 gives 3 files that hold the inputs in sorted order (less the skipped);
   --shard-size 20 gives ceil(inputs / 20) files of at most 20 samples each, the same samples.
3. determinism: --threads 1 and --threads 2 write byte-identical files.
4. resume: a conversion of many small shards (--shard-size 5 --threads 1, every large image
   re-encoded at --max-side 256) killed with SIGKILL once its first shard exists leaves only
   complete shards under final names; a leftover NAME.partial is not taken as finished; the rerun
   keeps the shards finished before the kill (>= 1) and ends byte-identical to an uninterrupted
   conversion elsewhere. If the conversion ends before the kill, the input is made larger.
5. a rerun with the same plan keeps every shard; a finished shard of another plan (--quality 80,
   or one image added) is refused: exit status != 0, the message names the file, which is left
   unchanged.
6. the flat validation folder (ILSVRC2012_val_*.JPEG and a LOC_val_solution.csv-style label file,
   "ImageId,PredictionString" then "name,class x y x y ...") with --classes-from the class tree:
   labels follow the class list; an image without a label line, a label line without an image,
   and an unknown class are errors that name them.
7. inspect --full passes on every shard written.
8. each shard's mean/std attributes (per channel, [0, 1] scale) are within 0.01 of those of every
   pixel PIL decodes from the shard's stored JPEGs (the converter samples pixels).
Exit 1 when a check fails; prints the measured figures either way.
"""
import argparse
import io
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

MAX_SIDE = 600
# mean/std attributes against all the decoded pixels of a shard (of 1, on the [0, 1] scale).
STATS_TOLERANCE = 0.01
# A re-encoded image may lose this much more (mean |diff|, of 255) than PIL's own encoder at the
# same quality loses on the same reference pixels.
PIXEL_MARGIN = 0.5
# Created in this order so that the sorted order (the labels) differs from creation order.
CLASSES = ["n02085620", "n01440764", "n03000134", "n01443537"]
SIZES = [(500, 375), (375, 500), (500, 333), (333, 500), (500, 400), (400, 300), (300, 225),
         (200, 260), (600, 450), (450, 600), (256, 256), (480, 360), (240, 320), (600, 400)]
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tga", ".ppm", ".pgm"}


class CheckFailed(Exception):
    """A failed expectation that makes the rest of its section meaningless."""


class Checks:
    def __init__(self):
        self.failures = []
        self.section = ""

    def expect(self, ok, message):
        if not ok:
            self.failures.append(f"[{self.section}] {message}")
        return ok

    def require(self, ok, message):
        if not ok:
            raise CheckFailed(message)


def photo_like(w, h, rng):
    """Smooth colour fields plus texture, the texture mostly in brightness as in a photo (noise
    of independent channels would be colour detail that 4:2:0 subsampling drops)."""
    small = rng.integers(0, 256, size=(max(2, h // 32), max(2, w // 32), 3), dtype=np.uint8)
    base = np.asarray(Image.fromarray(small).resize((w, h), Image.BICUBIC), dtype=np.float64)
    noise = rng.normal(0, 10, size=(h, w, 1)) + rng.normal(0, 3, size=(h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def save_jpeg(img, path, i):
    """Varied like a real tree: mostly quality 90 4:2:0, some 4:4:4, progressive, quality 75."""
    kw = {"quality": 90, "subsampling": 2}
    if i % 5 == 1:
        kw = {"quality": 95, "subsampling": 0}
    elif i % 7 == 3:
        kw = {"quality": 85, "subsampling": 2, "progressive": True}
    elif i % 4 == 2:
        kw = {"quality": 75, "subsampling": 2}
    img.save(path, "JPEG", **kw)


def make_tree(root, rng):
    """The class tree; returns {path: kind}, kind one of asis grey cmyk png big skip."""
    kinds = {}
    for c, cls in enumerate(CLASSES):
        (root / cls).mkdir(parents=True)
        # Names that sort as text, not as numbers (10 before 2), and ImageNet's upper-case .JPEG.
        for j in range(15):
            i = c * 15 + j
            w, h = SIZES[(i * 5) % len(SIZES)]
            path = root / cls / f"{cls}_{j}.JPEG"
            save_jpeg(Image.fromarray(photo_like(w, h, rng)), path, i)
            kinds[path] = "asis"
    text = root / CLASSES[0] / "x.jpg"
    text.write_text("not an image, but named like one\n")
    kinds[text] = "skip"
    (root / CLASSES[0] / "notes.txt").write_text("not an input\n")
    trunc = root / CLASSES[1] / f"{CLASSES[1]}_truncated.JPEG"
    Image.fromarray(photo_like(500, 375, rng)).save(trunc, quality=90)
    data = trunc.read_bytes()
    trunc.write_bytes(data[:len(data) * 55 // 100])
    kinds[trunc] = "skip"
    grey = root / CLASSES[2] / f"{CLASSES[2]}_grey.JPEG"
    Image.fromarray(photo_like(400, 300, rng)).convert("L").save(grey, quality=90)
    kinds[grey] = "grey"
    cmyk = root / CLASSES[3] / f"{CLASSES[3]}_cmyk.JPEG"
    cmyk_px = np.asarray(Image.fromarray(photo_like(300, 400, rng)).convert("CMYK")).copy()
    # A black channel that varies, so the conversion uses it (RGB -> CMYK in PIL leaves K at 0).
    cmyk_px[..., 3] = np.linspace(0, 120, 300, dtype=np.uint8)[None, :]
    Image.fromarray(cmyk_px, "CMYK").save(cmyk, quality=90)
    kinds[cmyk] = "cmyk"
    png = root / CLASSES[0] / f"{CLASSES[0]}_png.png"
    Image.fromarray(photo_like(350, 260, rng)).save(png)
    kinds[png] = "png"
    big = root / CLASSES[1] / f"{CLASSES[1]}_big.JPEG"
    Image.fromarray(photo_like(1024, 683, rng)).save(big, quality=90)
    kinds[big] = "big"
    return kinds


def sorted_inputs(root):
    """(path, label) in the converter's order: sorted class folders, sorted file names."""
    out = []
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    for label, cls in enumerate(classes):
        for name in sorted(p.name for p in (root / cls).iterdir()):
            if Path(name).suffix.lower() in IMAGE_EXTENSIONS:
                out.append((root / cls / name, label))
    return out


def run_tool(tool, *args):
    return subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)


def convert(checks, tool, *args):
    r = run_tool(tool, "folder", *args, "--jpeg", "-q")
    checks.require(r.returncode == 0, f"folder {' '.join(map(str, args))} failed (exit "
                                      f"{r.returncode}): {r.stderr.strip()}")
    return r.stdout


def parse_summary(checks, stdout):
    m = re.search(r"wrote (\d+) shard\(s\), kept (\d+) finished earlier, of (\d+)", stdout)
    n = re.search(r"inputs (\d+), samples written now (\d+) \((\d+) JPEGs as stored, (\d+) "
                  r"re-encoded\), skipped (\d+)", stdout)
    checks.require(m and n, f"summary not understood:\n{stdout}")
    keys = ["written", "kept", "shards", "inputs", "samples", "as_is", "reencoded", "skipped"]
    out = dict(zip(keys, map(int, m.groups() + n.groups())))
    out["skipped_lines"] = re.findall(r"^skipped (.+?): (.+)$", stdout, re.M)
    return out


def shard_files(prefix):
    return sorted(prefix.parent.glob(prefix.name + "-*-of-*.h5"))


def read_shards(checks, files):
    """Every sample of the shards in order: dicts of bytes, shape, label, and the shards' attrs."""
    samples, attrs = [], []
    for f in files:
        with h5py.File(f, "r") as h:
            a = {k: h.attrs[k] for k in h.attrs}
            attrs.append(a)
            encoded = h["encoded"][()]
            offsets = h["offsets"][()]
            shapes = h["shapes"][()]
            labels = h["labels"][()]
        n = len(labels)
        checks.require(offsets.shape == (n + 1,) and shapes.shape == (n, 2),
                       f"{f.name}: /offsets {offsets.shape}, /shapes {shapes.shape} for {n} labels")
        checks.require(offsets[0] == 0 and offsets[-1] == len(encoded) and
                       np.all(np.diff(offsets.astype(np.int64)) > 0),
                       f"{f.name}: /offsets do not partition /encoded")
        for i in range(n):
            samples.append({"bytes": encoded[offsets[i]:offsets[i + 1]].tobytes(),
                            "shape": tuple(int(x) for x in shapes[i]), "label": int(labels[i]),
                            "where": f"{f.name} sample {i}"})
    return samples, attrs


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def mean_abs_diff(a, b):
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def quality_tables(quality):
    buf = io.BytesIO()
    Image.new("RGB", (16, 16)).save(buf, "JPEG", quality=quality)
    return Image.open(buf).quantization


QUALITY_90_TABLES = quality_tables(90)


def pil_reencode_loss(ref):
    """What PIL's encoder at the converter's default quality loses on `ref` (mean |diff|)."""
    buf = io.BytesIO()
    ref.save(buf, "JPEG", quality=90, subsampling=2)
    return mean_abs_diff(np.asarray(Image.open(buf).convert("RGB")), np.asarray(ref))


def files_bytes(files):
    return {f.name: f.read_bytes() for f in files}


def check_attributes(checks, files, attrs):
    """The root attributes of each of the 3 shards."""
    for k, a in enumerate(attrs):
        name = files[k].name
        checks.expect(int(a.get("format_version", -1)) == 2, f"{name}: format_version "
                                                             f"{a.get('format_version')}")
        checks.expect(text(a.get("encoding")) == "jpeg", f"{name}: encoding {a.get('encoding')}")
        checks.expect([text(c) for c in a.get("class_names", [])] == sorted(CLASSES),
                      f"{name}: class_names {a.get('class_names')}")
        checks.expect(int(a.get("num_classes", -1)) == len(CLASSES),
                      f"{name}: num_classes {a.get('num_classes')}")
        checks.expect(int(a.get("shard_index", -1)) == k and int(a.get("num_shards", -1)) == 3,
                      f"{name}: shard_index {a.get('shard_index')} num_shards "
                      f"{a.get('num_shards')}")


def check_stats(checks, files, attrs, samples, figures):
    """mean/std (root attributes, [0, 1] scale, per channel) are the shard's decoded pixels': the
    converter samples them (1/8-scale decodes, every 16th pixel), so within STATS_TOLERANCE of
    PIL's decode of every stored pixel of the shard."""
    for f, a in zip(files, attrs):
        pix = np.concatenate([
            np.asarray(Image.open(io.BytesIO(smp["bytes"])).convert("RGB"),
                       dtype=np.float64).reshape(-1, 3) / 255.0
            for smp in samples if smp["where"].startswith(f.name + " ")])
        want_mean, want_std = pix.mean(axis=0), pix.std(axis=0)
        got_mean = np.asarray(a.get("mean", [np.nan] * 3), dtype=np.float64)
        got_std = np.asarray(a.get("std", [np.nan] * 3), dtype=np.float64)
        err = max(np.max(np.abs(got_mean - want_mean)), np.max(np.abs(got_std - want_std)))
        figures.append(f"{f.name}: mean/std within {err:.4f} of the decoded pixels'")
        checks.expect(got_mean.shape == (3,) and got_std.shape == (3,) and err <= STATS_TOLERANCE,
                      f"{f.name}: mean {got_mean} std {got_std}, the decoded pixels' "
                      f"{want_mean.round(4)} / {want_std.round(4)}")


def check_reencoded(checks, where, kind, path, stored, figures):
    """A re-encoded sample: a quality-90 RGB JPEG, resized only when bigger than MAX_SIDE, and no
    further from its source than PIL's own encode of it (plus PIXEL_MARGIN)."""
    checks.expect(stored.format == "JPEG" and stored.mode == "RGB",
                  f"{where}: {kind} input stored as {stored.format} {stored.mode}, not a "
                  f"3-channel JPEG")
    checks.expect(stored.quantization == QUALITY_90_TABLES,
                  f"{where}: {kind} input not re-encoded at quality 90 (its quantization "
                  f"tables are not libjpeg's for 90)")
    src = Image.open(path)
    ref = src.convert("RGB")
    if kind == "big":
        scale = MAX_SIDE / max(src.size)
        w, h = stored.size
        checks.expect(max(w, h) == MAX_SIDE and abs(w - src.width * scale) <= 1 and
                      abs(h - src.height * scale) <= 1,
                      f"{where}: {src.width}x{src.height} stored as {w}x{h}, expected the "
                      f"longer side {MAX_SIDE} and the aspect kept")
        ref = ref.resize((w, h), Image.BICUBIC, reducing_gap=None)
    elif not checks.expect(stored.size == src.size,
                           f"{where}: {src.size} stored as {stored.size}"):
        return
    if stored.size != ref.size:
        return
    d = mean_abs_diff(np.asarray(stored.convert("RGB")), np.asarray(ref))
    base = pil_reencode_loss(ref)
    figures.append(f"{kind} ({path.name}) re-encoded: mean |diff| {d:.2f} against "
                   f"{'PIL resize of ' if kind == 'big' else ''}the source; PIL's own "
                   f"quality 90 encode of that loses {base:.2f}")
    checks.expect(d <= base + PIXEL_MARGIN,
                  f"{where}: {kind} re-encode mean |diff| {d:.2f} > {base:.2f} (PIL's own "
                  f"quality 90 encode) + {PIXEL_MARGIN}")


def check_samples(checks, kept, samples, kinds, figures):
    """Each sample against its source, in sorted order."""
    for (path, label), smp in zip(kept, samples):
        where = f"{smp['where']} ({path.name})"
        kind = kinds[path]
        checks.expect(smp["label"] == label, f"{where}: label {smp['label']}, class folder index "
                                             f"{label}")
        stored = Image.open(io.BytesIO(smp["bytes"]))
        stored.load()
        checks.expect(smp["shape"] == (stored.height, stored.width),
                      f"{where}: /shapes {smp['shape']}, PIL decodes {stored.height}x"
                      f"{stored.width}")
        if kind == "asis":
            checks.expect(smp["bytes"] == path.read_bytes(),
                          f"{where}: stored bytes differ from the source file's")
            continue
        check_reencoded(checks, where, kind, path, stored, figures)


def check_round_trip(checks, tool, root, kinds, out, figures):
    """Checks 1 and 2 (--shards 3); returns the shard files."""
    stdout = convert(checks, tool, root, "-o", out / "a", "--max-side", MAX_SIDE, "--shards", 3,
                     "--threads", 2)
    s = parse_summary(checks, stdout)
    files = shard_files(out / "a")
    inputs = sorted_inputs(root)
    kept = [(p, label) for p, label in inputs if kinds[p] != "skip"]
    skipped = [p for p, _ in inputs if kinds[p] == "skip"]
    reencoded = [p for p, _ in kept if kinds[p] != "asis"]
    checks.expect([f.name for f in files] == [f"a-{k:05d}-of-00003.h5" for k in range(3)],
                  f"--shards 3 wrote {[f.name for f in files]}")
    samples, attrs = read_shards(checks, files)
    checks.require(len(samples) == len(kept),
                   f"{len(samples)} samples in the shards, {len(kept)} inputs that decode "
                   f"({len(inputs)} inputs, {len(skipped)} to skip)")
    # The summary against the files.
    want = {"written": 3, "kept": 0, "shards": 3, "inputs": len(inputs), "samples": len(kept),
            "as_is": len(kept) - len(reencoded), "reencoded": len(reencoded),
            "skipped": len(skipped)}
    for k, v in want.items():
        checks.expect(s[k] == v, f"summary says {k} {s[k]}, the files say {v}:\n{stdout}")
    listed = sorted(os.path.normpath(p) for p, _ in s["skipped_lines"])
    checks.expect(listed == sorted(os.path.normpath(p) for p in skipped),
                  f"skipped files listed: {listed}, expected {[str(p) for p in skipped]}")
    check_attributes(checks, files, attrs)
    check_stats(checks, files, attrs, samples, figures)
    check_samples(checks, kept, samples, kinds, figures)
    # Skipped files' bytes are in no shard (they are not JPEGs the converter would store).
    all_bytes = b"".join(smp["bytes"] for smp in samples)
    for p in skipped:
        data = p.read_bytes()
        middle = data[len(data) // 2:len(data) // 2 + 32]  # past any header JPEGs share
        checks.expect(middle not in all_bytes, f"{p.name} (skipped) is in a shard")
    return files


def check_shard_size(checks, tool, root, out):
    stdout = convert(checks, tool, root, "-o", out / "c", "--max-side", MAX_SIDE,
                     "--shard-size", 20)
    s = parse_summary(checks, stdout)
    n = len(sorted_inputs(root))
    files = shard_files(out / "c")
    want = math.ceil(n / 20)
    checks.expect(len(files) == want and s["shards"] == want,
                  f"--shard-size 20 on {n} inputs: {len(files)} files, summary {s['shards']}; "
                  f"expected ceil({n}/20) = {want}")
    a_samples, _ = read_shards(checks, shard_files(out / "a"))
    c_samples, attrs = read_shards(checks, files)
    checks.expect([x["bytes"] for x in c_samples] == [x["bytes"] for x in a_samples],
                  "--shard-size 20 and --shards 3 hold different samples or order")
    per_file = []
    for f in files:
        with h5py.File(f, "r") as h:
            per_file.append(len(h["labels"]))
    checks.expect(max(per_file) <= 20, f"--shard-size 20: shards of {per_file} samples")
    return files


def check_threads(checks, tool, root, out):
    convert(checks, tool, root, "-o", out / "b", "--max-side", MAX_SIDE, "--shards", 3,
            "--threads", 1)
    one = files_bytes(shard_files(out / "b"))
    two = {k.replace("a-", "b-", 1): v for k, v in files_bytes(shard_files(out / "a")).items()}
    checks.require(sorted(one) == sorted(two), f"--threads 1 wrote {sorted(one)}, --threads 2 "
                                               f"{sorted(two)}")
    for name in sorted(one):
        checks.expect(one[name] == two[name], f"{name}: --threads 1 and --threads 2 files differ")
    return shard_files(out / "b")


def grow_tree(src, dst, copies):
    """dst: src's class folders with every file copied `copies` times under new names."""
    for cls in sorted(p for p in src.iterdir() if p.is_dir()):
        (dst / cls.name).mkdir(parents=True)
        for f in sorted(cls.iterdir()):
            for k in range(copies):
                shutil.copyfile(f, dst / cls.name / f"c{k}_{f.name}")


def check_resume(checks, tool, root, out, figures):
    args = ["--max-side", 256, "--shard-size", 5, "--threads", 1]
    tree = root
    for attempt in range(4):
        work = out / f"resume{attempt}"
        work.mkdir()
        prefix = work / "r"
        first = None
        proc = subprocess.Popen([str(tool), "folder", str(tree), "-o", str(prefix), *map(str, args),
                                 "--jpeg", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t0 = time.monotonic()
        while proc.poll() is None and time.monotonic() - t0 < 60:
            done = shard_files(prefix)
            if done:
                first = done[0]
                break
            time.sleep(0.001)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        checks.require(proc.returncode in (0, -signal.SIGKILL),
                       f"the conversion to kill failed (exit {proc.returncode}): "
                       f"{err.decode(errors='replace').strip()}")
        checks.require(first is not None, "no shard within 60 s")
        if proc.returncode == -signal.SIGKILL:
            break
        # Finished before the kill: a larger input, so that the kill lands mid-conversion.
        copies = 2 ** (attempt + 1)
        figures.append(f"resume: attempt {attempt} finished before the kill; input x{copies}")
        tree = out / f"resume_tree{attempt}"
        grow_tree(root, tree, copies)
    else:
        raise CheckFailed("every conversion finished before the kill, even on an 8x input")
    n = len(sorted_inputs(tree))
    total = math.ceil(n / 5)
    finished = shard_files(prefix)
    names = [f.name for f in finished]
    checks.require(1 <= len(finished) < total,
                   f"after the kill: {len(finished)} of {total} shards finished: {names}")
    checks.expect(names == [f"r-{k:05d}-of-{total:05d}.h5" for k in range(len(names))],
                  f"finished shards after the kill are not the first ones: {names}")
    figures.append(f"resume: killed with {len(finished)} of {total} shards finished "
                   f"({n} inputs, attempt {attempt})")
    for f in finished:
        r = run_tool(tool, "inspect", "--full", f)
        checks.expect(r.returncode == 0, f"{f.name}, finished before the kill, is not complete: "
                                         f"{r.stdout.strip()} {r.stderr.strip()}")
    # What a kill while writing leaves: a NAME.partial of the next shard, half written.
    nxt = work / f"r-{len(finished):05d}-of-{total:05d}.h5"
    partial = Path(str(nxt) + ".partial")
    if partial.exists():
        partial.write_bytes(partial.read_bytes()[:1000])
    else:
        shutil.copyfile(finished[0], partial)
    r = run_tool(tool, "folder", tree, "-o", prefix, *args, "--jpeg", "-q")
    checks.require(r.returncode == 0, f"the rerun failed (exit {r.returncode}): {r.stderr.strip()}")
    s = parse_summary(checks, r.stdout)
    checks.expect(s["kept"] == len(finished) and s["written"] == total - len(finished),
                  f"the rerun kept {s['kept']} and wrote {s['written']}; {len(finished)} of "
                  f"{total} were finished before the kill:\n{r.stdout}")
    leftovers = sorted(p.name for p in work.glob("*.partial"))
    checks.expect(not leftovers, f"after the rerun: {leftovers}")
    ref = out / "resume_ref"
    ref.mkdir()
    convert(checks, tool, tree, "-o", ref / "r", *args)
    got, want = files_bytes(shard_files(prefix)), files_bytes(shard_files(ref / "r"))
    checks.require(sorted(got) == sorted(want), f"resumed: {sorted(got)}, uninterrupted: "
                                                f"{sorted(want)}")
    for name in sorted(got):
        checks.expect(got[name] == want[name],
                      f"{name}: the resumed file differs from the uninterrupted conversion's")
    return shard_files(prefix) + shard_files(ref / "r")


def check_plan(checks, tool, root, out, rng):
    prefix = out / "a"
    files = shard_files(prefix)
    before = files_bytes(files)
    base = ["--max-side", MAX_SIDE, "--shards", 3]
    s = parse_summary(checks, convert(checks, tool, root, "-o", prefix, *base))
    checks.expect(s["kept"] == 3 and s["written"] == 0,
                  f"a rerun with the same plan kept {s['kept']} and wrote {s['written']} of 3")

    def refused(what, tree, *extra):
        r = run_tool(tool, "folder", tree, "-o", prefix, *base, *extra, "--jpeg", "-q")
        checks.expect(r.returncode != 0, f"{what}: a shard of another plan was accepted "
                                         f"(exit 0):\n{r.stdout}")
        checks.expect(files[0].name in r.stderr and str(files[0].parent) in r.stderr,
                      f"{what}: the message does not name {files[0]}: {r.stderr.strip()}")
        checks.expect(files_bytes(files) == before, f"{what}: the finished shards were changed")
        checks.expect(not list(out.glob("a-*.partial")), f"{what}: a .partial was left")

    refused("--quality 80", root, "--quality", 80)
    added = root / CLASSES[2] / f"{CLASSES[2]}_added.JPEG"
    save_jpeg(Image.fromarray(photo_like(500, 375, rng)), added, 0)
    try:
        refused("one image added", root)
    finally:
        added.unlink()


def check_val(checks, tool, root, out, rng):
    val = out / "val"
    val.mkdir()
    classes = sorted(CLASSES)
    names = [f"ILSVRC2012_val_{i:08d}" for i in range(1, 11)]
    labels = {name: classes[int(rng.integers(0, len(classes)))] for name in names}
    for i, name in enumerate(names):
        w, h = SIZES[(i * 3) % len(SIZES)]
        save_jpeg(Image.fromarray(photo_like(w, h, rng)), val / f"{name}.JPEG", i)

    def label_file(path, entries):
        lines = ["ImageId,PredictionString"]
        for name, cls in entries:
            lines.append(f"{name},{cls} 12 34 200 180 {cls} 0 0 100 100 ")
        path.write_text("\n".join(lines) + "\n")

    order = [names[int(i)] for i in rng.permutation(len(names))]  # not in file order
    good = out / "LOC_val_solution.csv"
    label_file(good, [(n, labels[n]) for n in order])
    convert(checks, tool, val, "-o", out / "v" / "val", "--val-labels", good, "--classes-from",
            root)
    files = shard_files(out / "v" / "val")
    samples, attrs = read_shards(checks, files)
    checks.require(len(samples) == len(names), f"{len(samples)} samples of {len(names)} images")
    checks.expect([text(c) for c in attrs[0].get("class_names", [])] == classes,
                  f"class_names {attrs[0].get('class_names')}, --classes-from has {classes}")
    for name, smp in zip(names, samples):
        checks.expect(smp["label"] == classes.index(labels[name]),
                      f"{name}: label {smp['label']}, the label file says {labels[name]} = "
                      f"{classes.index(labels[name])}")
        checks.expect(smp["bytes"] == (val / f"{name}.JPEG").read_bytes(),
                      f"{name}: stored bytes differ from the file's")

    def error(what, folder, labels_path, must_name):
        r = run_tool(tool, "folder", folder, "-o", out / "bad" / "val", "--val-labels", labels_path,
                     "--classes-from", root, "--jpeg", "-q")
        checks.expect(r.returncode != 0, f"{what}: accepted (exit 0)")
        checks.expect(must_name in r.stderr, f"{what}: the message does not name {must_name}: "
                                             f"{r.stderr.strip()}")

    unlabelled = out / "val_extra"
    shutil.copytree(val, unlabelled)
    extra = "ILSVRC2012_val_00000099"
    save_jpeg(Image.fromarray(photo_like(300, 200, rng)), unlabelled / f"{extra}.JPEG", 0)
    error("an image with no label line", unlabelled, good, extra)
    ghost = "ILSVRC2012_val_00000042"
    missing = out / "labels_missing.csv"
    label_file(missing, [(n, labels[n]) for n in order] + [(ghost, classes[0])])
    error("a label line with no image", val, missing, ghost)
    unknown = out / "labels_unknown.csv"
    label_file(unknown, [(n, labels[n]) for n in order[:-1]] + [(order[-1], "n99999999")])
    error("an unknown class", val, unknown, "n99999999")
    return files


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True, help="hpctrain-data")
    args = p.parse_args()
    tool = Path(args.tool).resolve()
    rng = np.random.default_rng(23)
    checks = Checks()
    figures = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="convert_jpeg_folder_") as tmp:
        root = Path(tmp) / "train"
        out = Path(tmp) / "out"
        out.mkdir()
        kinds = make_tree(root, rng)
        written = []
        sections = [
            ("1 round trip, 2 --shards", lambda: check_round_trip(checks, tool, root, kinds, out,
                                                                  figures)),
            ("2 --shard-size", lambda: check_shard_size(checks, tool, root, out)),
            ("3 threads", lambda: check_threads(checks, tool, root, out)),
            ("4 resume", lambda: check_resume(checks, tool, root, out, figures)),
            ("5 plan", lambda: check_plan(checks, tool, root, out, rng)),
            ("6 validation folder", lambda: check_val(checks, tool, root, out, rng)),
        ]
        for name, fn in sections:
            checks.section = name
            t = time.monotonic()
            try:
                written += fn() or []
            except CheckFailed as e:
                checks.failures.append(f"[{name}] {e}")
            print(f"{name}: {time.monotonic() - t:.1f} s")
        checks.section = "7 inspect --full"
        checks.expect(len(written) >= 10, f"only {len(written)} shards to inspect")
        r = run_tool(tool, "inspect", "--full", *written)
        ok = r.stdout.count(": OK,")
        checks.expect(r.returncode == 0 and ok == len(written),
                      f"inspect --full: exit {r.returncode}, {ok} of {len(written)} OK:\n"
                      f"{r.stdout}{r.stderr}")
        figures.append(f"inspect --full: {ok} of {len(written)} shards OK")
    for f in figures:
        print(f)
    print(f"total {time.monotonic() - t0:.1f} s")
    for f in checks.failures:
        print("FAIL:", f, file=sys.stderr)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
