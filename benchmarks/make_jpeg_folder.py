"""Makes a class-folder set of JPEG photos for the loader benchmarks (benchmarks/loader_vs_torch.py):
DIR/train/<class>/*.jpg and DIR/test/<class>/*.jpg, the ten classes of Fashion-MNIST, each image
256 px on its shorter side (mixed aspect: 1:1, 5:4, 4:3, 3:2, 16:10; of the non-square, 3 in 5 landscape),
RGB, baseline JPEG at quality 90 with 4:2:0 chroma (what cameras and ImageNet's files are).

Each image is a Fashion-MNIST item (the first N/10 of each class, in the file's order) upscaled to
about two thirds of the frame, coloured from a two-colour ramp and a woven texture, laid at a
random place on a background of a gradient, soft clouds, a few blurred shapes, surface texture
and grain: content a JPEG decoder works on like a photo's (about 19 KiB a file at the defaults),
neither flat colour nor white noise.

Seeded: the same arguments make the same bytes (with the same Pillow and numpy). Idempotent: a
folder whose manifest.json records the same arguments is reused as it is; one without a manifest
that is not empty is refused, never deleted.

    /work/venv-torch/bin/python benchmarks/make_jpeg_folder.py --out /work/jpeg256 --train 2000 --test 200

Needs Pillow and numpy (PyTorch's virtual environment has both once torchvision is installed).
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import time

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

FASHION = "/usr/share/datasets/fashion-mnist"
CLASSES = ("0_tshirt", "1_trouser", "2_pullover", "3_dress", "4_coat", "5_sandal", "6_shirt", "7_sneaker",
           "8_bag", "9_ankle_boot")
# The longer side over the shorter: square, 5:4, 4:3, 3:2, 16:10 (256 x 256 ... 256 x 410).
ASPECTS = (1.0, 1.25, 4 / 3, 1.5, 1.6)
VERSION = 1  # of the drawing below: a change to it must change this, so that old folders are remade


def idx(path):
    """An IDX file (gzip'd or not) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def balanced(labels, count):
    """Indices of the first ceil(count / 10) items of each class, in the file's order, interleaved
    class by class and cut to count (so that the classes differ by one at most)."""
    per_class = [np.flatnonzero(labels == c) for c in range(len(CLASSES))]
    want = -(-count // len(CLASSES))
    if any(len(p) < want for p in per_class):
        sys.exit(f"asked for {count} images: Fashion-MNIST has fewer than {want} of some class here")
    return [int(per_class[c][k]) for k in range(want) for c in range(len(CLASSES))][:count]


def smooth_field(rng, height, width, cells):
    """Random values on a cells x cells grid upscaled bicubically: soft clouds in [0, 1]."""
    grid = Image.fromarray((rng.random((cells, cells)) * 255).astype(np.uint8), "L")
    return np.asarray(grid.resize((width, height), Image.BICUBIC), np.float32) / 255


def photo(rng, item, short_side):
    """One RGB picture (a PIL image) of the 28 x 28 grey item."""
    aspect = ASPECTS[rng.integers(len(ASPECTS))]
    long_side = int(round(short_side * aspect))
    height, width = (long_side, short_side) if rng.random() < 0.4 else (short_side, long_side)

    # Background: a linear gradient between two colours at a random angle, clouds at two scales.
    a, b = rng.uniform(20, 235, 3), rng.uniform(20, 235, 3)
    angle = rng.uniform(0, 2 * np.pi)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    ramp = (xs * np.cos(angle) + ys * np.sin(angle))
    ramp = (ramp - ramp.min()) / max(float(ramp.max() - ramp.min()), 1.0)
    background = a + (b - a) * ramp[..., None]
    clouds = smooth_field(rng, height, width, 6) - 0.5
    detail = smooth_field(rng, height, width, 40) - 0.5
    background += (clouds * 70)[..., None] + detail[..., None] * rng.uniform(10, 30, 3)
    canvas = Image.fromarray(np.clip(background, 0, 255).astype(np.uint8), "RGB")

    # A few shapes, softened: out-of-focus things behind the subject.
    draw = ImageDraw.Draw(canvas)
    for _ in range(rng.integers(3, 8)):
        x0, y0 = rng.uniform(-0.2, 1.0) * width, rng.uniform(-0.2, 1.0) * height
        x1, y1 = x0 + rng.uniform(0.1, 0.6) * width, y0 + rng.uniform(0.1, 0.6) * height
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        kind = rng.integers(3)
        if kind == 0:
            draw.ellipse((x0, y0, x1, y1), fill=colour)
        elif kind == 1:
            draw.rectangle((x0, y0, x1, y1), fill=colour)
        else:
            draw.line((x0, y0, x1, y1), fill=colour, width=int(rng.integers(2, 12)))
    canvas = canvas.filter(ImageFilter.GaussianBlur(rng.uniform(1.5, 4.0)))

    # The subject: the item upscaled to 55-80 % of the shorter side, coloured by a ramp from a dark
    # to a light colour, woven (stripes at a random angle and pitch), its darkness as its alpha.
    size = int(short_side * rng.uniform(0.55, 0.8))
    grey = np.asarray(Image.fromarray(item, "L").resize((size, size), Image.BICUBIC), np.float32) / 255
    dark, light = rng.uniform(0, 120, 3), rng.uniform(120, 255, 3)
    weave_angle, pitch = rng.uniform(0, np.pi), rng.uniform(3, 9)
    sy, sx = np.mgrid[0:size, 0:size].astype(np.float32)
    weave = 0.5 + 0.5 * np.sin((sx * np.cos(weave_angle) + sy * np.sin(weave_angle)) * 2 * np.pi / pitch)
    shade = np.clip(grey * (0.75 + 0.25 * weave), 0, 1)
    subject = dark + (light - dark) * shade[..., None]
    alpha = np.clip(grey * 3, 0, 1)
    top, left = int(rng.integers(0, height - size + 1)), int(rng.integers(0, width - size + 1))
    pixels = np.asarray(canvas, np.float32).copy()
    region = pixels[top:top + size, left:left + size]
    region[...] = region * (1 - alpha[..., None]) + subject * alpha[..., None]

    # Surface texture in focus (a cloud field of cells a few pixels wide), a lens-like falloff
    # of light and sensor grain.
    texture = smooth_field(rng, height, width, short_side // 4) - 0.5
    vignette = 1 - 0.25 * (((xs / width - 0.5) ** 2 + (ys / height - 0.5) ** 2) * 2)
    pixels = (pixels + texture[..., None] * rng.uniform(20, 50)) * vignette[..., None]
    pixels += rng.normal(0, 3.5, pixels.shape)
    return Image.fromarray(np.clip(pixels + 0.5, 0, 255).astype(np.uint8), "RGB")


def settings(a):
    return {"version": VERSION, "train": a.train, "test": a.test, "short_side": a.short_side, "quality": a.quality,
            "seed": a.seed, "source": os.path.abspath(a.fashion)}


def count_files(root):
    return sum(len(files) for _, _, files in os.walk(root))


def reusable(out, wanted):
    """Whether out already holds this set: its manifest records the same settings and the files are there."""
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return False
    return ({k: manifest.get(k) for k in wanted} == wanted
            and count_files(os.path.join(out, "train")) == wanted["train"]
            and count_files(os.path.join(out, "test")) == wanted["test"])


def write_split(split, images, labels, indices, into, a, seed_part):
    sizes, total_bytes = {}, 0
    for c in CLASSES:
        os.makedirs(os.path.join(into, split, c), exist_ok=True)
    for n, i in enumerate(indices):
        rng = np.random.default_rng([a.seed, seed_part, n])
        picture = photo(rng, images[i], a.short_side)
        path = os.path.join(into, split, CLASSES[labels[i]], f"{split}_{n:06d}.jpg")
        picture.save(path, "JPEG", quality=a.quality, subsampling=2, optimize=False, progressive=False)
        total_bytes += os.path.getsize(path)
        key = f"{picture.width}x{picture.height}"
        sizes[key] = sizes.get(key, 0) + 1
    return sizes, total_bytes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="the folder to make (or reuse)")
    p.add_argument("--train", type=int, default=2000, help="training images")
    p.add_argument("--test", type=int, default=200, help="test images")
    p.add_argument("--short-side", type=int, default=256)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fashion", default=FASHION, help="the folder of Fashion-MNIST's IDX files")
    a = p.parse_args()
    out = os.path.abspath(a.out)
    wanted = settings(a)
    if reusable(out, wanted):
        print(f"{out}: already holds {a.train} train and {a.test} test images made so; reused")
        return
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, "manifest.json")):
        sys.exit(f"{out} is not empty and has no manifest.json: not made by this script, left alone")

    start = time.time()
    # Made beside the target and renamed into place at the end: an interrupted run leaves no
    # half-made folder that looks whole.
    partial = out + f".partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    manifest = dict(wanted, classes=list(CLASSES), subsampling="4:2:0", progressive=False,
                    pillow=Image.__version__, numpy=np.__version__)
    for split, prefix, count, seed_part in (("train", "train", a.train, 1), ("test", "t10k", a.test, 2)):
        images = idx(os.path.join(a.fashion, f"{prefix}-images-idx3-ubyte.gz"))
        labels = idx(os.path.join(a.fashion, f"{prefix}-labels-idx1-ubyte.gz"))
        sizes, total = write_split(split, images, labels, balanced(labels, count), partial, a, seed_part)
        manifest[f"{split}_sizes"] = dict(sorted(sizes.items()))
        manifest[f"{split}_mean_kib"] = round(total / max(count, 1) / 1024, 1)
    with open(os.path.join(partial, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    if os.path.exists(out):
        shutil.rmtree(out)  # holds this script's manifest (checked above) or nothing
    os.rename(partial, out)
    print(f"{out}: {a.train} train and {a.test} test images, {manifest['train_mean_kib']} KiB a file on "
          f"average, in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
